package activities

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Inputs and results of the tools. JSON names are what a planner (or a model) writes.
type (
	SearchDocsInput struct {
		Query string `json:"query"`
	}
	Doc struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Snippet string `json:"snippet"`
	}
	SearchDocsResult struct {
		Query   string `json:"query"`
		Results []Doc  `json:"results"`
	}

	GetCustomerInput struct {
		CustomerID string `json:"customer_id"`
	}
	Customer struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Email string `json:"email"`
		Plan  string `json:"plan"`
	}

	UpsertContactInput struct {
		Email   string `json:"email"`
		Name    string `json:"name"`
		Company string `json:"company,omitempty"`
	}
	Contact struct {
		Email   string `json:"email"`
		Name    string `json:"name"`
		Company string `json:"company,omitempty"`
		Version int    `json:"version"`
	}

	CreateTicketInput struct {
		Subject   string `json:"subject"`
		Requester string `json:"requester"`
		Body      string `json:"body,omitempty"`
	}
	Ticket struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
		Status  string `json:"status"`
	}

	ChargeCardInput struct {
		Customer    string `json:"customer"`
		Amount      int64  `json:"amount"` // minor units (cents)
		Currency    string `json:"currency"`
		Description string `json:"description,omitempty"`
	}
	Charge struct {
		ID       string `json:"id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Customer string `json:"customer"`
		Status   string `json:"status"`
	}

	SendEmailInput struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
		Body    string `json:"body"`
	}
	EmailReceipt struct {
		MessageID string `json:"message_id"`
	}

	PostSlackMessageInput struct {
		Channel string `json:"channel"`
		Text    string `json:"text"`
	}
	SlackMessage struct {
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
)

// Tool describes one tool for planners: its name, what it does, and how to check
// the arguments a planner gives it.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments (for model planners).
	Schema json.RawMessage
	decode func(raw json.RawMessage) error
}

// Registry lists the tools, in the order a model sees them.
var Registry = []Tool{
	tool[SearchDocsInput]("SearchDocs", "Search the help center. Read-only.",
		`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`,
		func(in SearchDocsInput) error { return need("query", in.Query) }),
	tool[GetCustomerInput]("GetCustomer", "Fetch a customer by id (cus_...). Read-only.",
		`{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"]}`,
		func(in GetCustomerInput) error { return need("customer_id", in.CustomerID) }),
	tool[UpsertContactInput]("UpsertContact", "Create or update the CRM contact with this e-mail.",
		`{"type":"object","properties":{"email":{"type":"string"},"name":{"type":"string"},"company":{"type":"string"}},"required":["email","name"]}`,
		func(in UpsertContactInput) error {
			return errors.Join(email("email", in.Email), need("name", in.Name))
		}),
	tool[CreateTicketInput]("CreateTicket", "Open a support ticket.",
		`{"type":"object","properties":{"subject":{"type":"string"},"requester":{"type":"string"},"body":{"type":"string"}},"required":["subject","requester"]}`,
		func(in CreateTicketInput) error {
			return errors.Join(need("subject", in.Subject), email("requester", in.Requester))
		}),
	tool[ChargeCardInput]("ChargeCard", "Charge the customer's card on file. Amount in cents.",
		`{"type":"object","properties":{"customer":{"type":"string"},"amount":{"type":"integer","minimum":1},"currency":{"type":"string"},"description":{"type":"string"}},"required":["customer","amount","currency"]}`,
		func(in ChargeCardInput) error {
			var errs []error
			if in.Amount <= 0 {
				errs = append(errs, fmt.Errorf("amount must be a positive number of cents, got %d", in.Amount))
			}
			if len(in.Currency) != 3 {
				errs = append(errs, fmt.Errorf("currency must be a 3-letter ISO code, got %q", in.Currency))
			}
			return errors.Join(append(errs, need("customer", in.Customer))...)
		}),
	tool[SendEmailInput]("SendEmail", "Send an e-mail. The provider takes no idempotency key.",
		`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}`,
		func(in SendEmailInput) error {
			return errors.Join(email("to", in.To), need("subject", in.Subject), need("body", in.Body))
		}),
	tool[PostSlackMessageInput]("PostSlackMessage", "Post a message to a chat channel. The provider takes no idempotency key.",
		`{"type":"object","properties":{"channel":{"type":"string"},"text":{"type":"string"}},"required":["channel","text"]}`,
		func(in PostSlackMessageInput) error {
			return errors.Join(need("channel", in.Channel), need("text", in.Text))
		}),
}

func tool[T any](name, desc, schema string, validate func(T) error) Tool {
	return Tool{Name: name, Description: desc, Schema: json.RawMessage(schema), decode: func(raw json.RawMessage) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var in T
		if err := dec.Decode(&in); err != nil {
			return err
		}
		return validate(in)
	}}
}

// NewTool describes a tool from elsewhere (an MCP server's) for planners. check
// validates a call's arguments, given as a JSON object; nil accepts any object.
func NewTool(name, description string, schema json.RawMessage, check func(args map[string]any) error) Tool {
	return Tool{Name: name, Description: description, Schema: schema, decode: func(raw json.RawMessage) error {
		var args map[string]any
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return errors.New("the arguments must be a JSON object")
		}
		if check == nil {
			return nil
		}
		return check(args)
	}}
}

// Toolset is the tools a planner may call: Registry, and whatever a worker adds
// (an MCP server's tools).
type Toolset []Tool

// Lookup returns the tool named name.
func Lookup(name string) (Tool, bool) { return Toolset(Registry).Lookup(name) }

// Lookup returns the tool named name.
func (ts Toolset) Lookup(name string) (Tool, bool) {
	i := slices.IndexFunc(ts, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return ts[i], true
}

// CheckCall checks that a planner's call names a known tool with arguments that fit
// it. The error is one line that says what to fix.
func CheckCall(name string, args json.RawMessage) error {
	return Toolset(Registry).CheckCall(name, args)
}

// CheckCall checks that a planner's call names one of the tools with arguments that
// fit it. The error is one line that says what to fix.
func (ts Toolset) CheckCall(name string, args json.RawMessage) error {
	if err := ts.checkCall(name, args); err != nil {
		return fmt.Errorf("idemgate/activities: %w", err)
	}
	return nil
}

// checkCall is CheckCall without the package's prefix, for errors that wrap it.
func (ts Toolset) checkCall(name string, args json.RawMessage) error {
	t, ok := ts.Lookup(name)
	if !ok {
		known := make([]string, len(ts))
		for i, r := range ts {
			known[i] = r.Name
		}
		return fmt.Errorf("unknown tool %q: use one of %s", name, strings.Join(known, ", "))
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if err := t.decode(args); err != nil {
		return fmt.Errorf("arguments %s do not fit %s: %s", args, name, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

func need(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("%s is required", field)
	}
	return nil
}

func email(field, v string) error {
	if at := strings.IndexByte(v, '@'); at <= 0 || at == len(v)-1 {
		return fmt.Errorf("%s must be an e-mail address, got %q", field, v)
	}
	return nil
}
