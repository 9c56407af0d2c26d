// Package activities is a realistic agent tool set: each tool is a Temporal activity
// that calls a vendor over HTTP through idemhttp. Reads: SearchDocs, GetCustomer.
// Idempotent writes: UpsertContact (keyed by the contact's e-mail through
// Options.IdentifyingFields) and CreateTicket (the key forwarded in the IETF
// Idempotency-Key header). Destructive: ChargeCard (the key forwarded Stripe-style),
// SendEmail and PostSlackMessage (their vendors take no key). Every name classifies
// correctly without overrides; GateOptions gives the interceptor options they need.
//
// Copy this package to wire idemgate into your own agent: the pattern is one
// idemhttp client per vendor, the activity's ctx on every request, and 4xx
// rejections returned as non-retryable errors (the transport has already told the gate
// the write did not happen).
package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/store"
)

// Endpoints are the vendors' base URLs.
type Endpoints struct {
	Docs, CRM, Tickets, Payments, Email, Chat string
}

// Tools are the agent's tools. Register with worker.RegisterActivity(tools).
type Tools struct {
	ep                                       Endpoints
	docs, crm, tickets, payments, mail, chat *http.Client
}

// New returns the tools, each vendor behind its idemhttp profile.
func New(ep Endpoints) (*Tools, error) {
	for name, u := range map[string]string{"docs": ep.Docs, "crm": ep.CRM, "tickets": ep.Tickets,
		"payments": ep.Payments, "email": ep.Email, "chat": ep.Chat} {
		if _, err := url.ParseRequestURI(u); err != nil || u == "" {
			return nil, fmt.Errorf("idemgate/activities: the %s endpoint %q is not a URL: give the vendor's base URL, e.g. http://127.0.0.1:8080", name, secrets.Redact(u))
		}
	}
	client := func(p idemhttp.Profile) *http.Client {
		c := idemhttp.Client(p)
		c.Timeout = 30 * time.Second
		return c
	}
	tickets := idemhttp.IETF
	tickets.Name = "tickets"
	return &Tools{ep: ep,
		docs:     client(idemhttp.NoKey),
		crm:      client(idemhttp.NoKey),
		tickets:  client(tickets),
		payments: client(idemhttp.Stripe),
		mail:     client(idemhttp.NoKey),
		chat:     client(idemhttp.NoKey),
	}, nil
}

// Names lists the tools' activity names.
func Names() []string {
	names := make([]string, len(Registry))
	for i, t := range Registry {
		names[i] = t.Name
	}
	return append(names, "PlanNextStep")
}

// GateOptions are the interceptor options for this tool set: the contact's e-mail
// identifies an UpsertContact, and ChargeCard's vendor deduplicates on the forwarded
// key for its window, so a charge whose first attempt's outcome is unknown is re-sent
// with the same key and answered from the vendor's store.
func GateOptions(st store.Store) interceptor.Options {
	return interceptor.Options{
		Store:             st,
		IdentifyingFields: map[string][]string{"UpsertContact": {"email"}},
		VendorWindows:     map[string]time.Duration{"ChargeCard": idemhttp.Stripe.Window},
	}
}

// SearchDocs searches the knowledge base. Read.
func (t *Tools) SearchDocs(ctx context.Context, in SearchDocsInput) (SearchDocsResult, error) {
	var out SearchDocsResult
	err := t.call(ctx, t.docs, http.MethodGet, t.ep.Docs+"/search?q="+url.QueryEscape(in.Query), nil, &out)
	return out, err
}

// GetCustomer fetches a customer. Read.
func (t *Tools) GetCustomer(ctx context.Context, in GetCustomerInput) (Customer, error) {
	var out Customer
	err := t.call(ctx, t.crm, http.MethodGet, t.ep.CRM+"/customers/"+url.PathEscape(in.CustomerID), nil, &out)
	return out, err
}

// UpsertContact creates or replaces the contact with this e-mail. Idempotent write.
func (t *Tools) UpsertContact(ctx context.Context, in UpsertContactInput) (Contact, error) {
	var out Contact
	err := t.call(ctx, t.crm, http.MethodPut, t.ep.CRM+"/contacts/"+url.PathEscape(in.Email),
		map[string]any{"name": in.Name, "company": in.Company}, &out)
	return out, err
}

// CreateTicket opens a support ticket; the desk deduplicates on the forwarded key.
// Idempotent write.
func (t *Tools) CreateTicket(ctx context.Context, in CreateTicketInput) (Ticket, error) {
	var out Ticket
	err := t.call(ctx, t.tickets, http.MethodPost, t.ep.Tickets+"/tickets",
		map[string]any{"subject": in.Subject, "requester": in.Requester, "body": in.Body}, &out)
	return out, err
}

// ChargeCard charges a customer; the processor deduplicates on the forwarded
// Stripe-style key. Destructive.
func (t *Tools) ChargeCard(ctx context.Context, in ChargeCardInput) (Charge, error) {
	var out Charge
	err := t.call(ctx, t.payments, http.MethodPost, t.ep.Payments+"/v1/charges",
		map[string]any{"customer": in.Customer, "amount": in.Amount, "currency": in.Currency, "description": in.Description}, &out)
	return out, err
}

// SendEmail sends an e-mail; the sender takes no key. Destructive.
func (t *Tools) SendEmail(ctx context.Context, in SendEmailInput) (EmailReceipt, error) {
	var out EmailReceipt
	err := t.call(ctx, t.mail, http.MethodPost, t.ep.Email+"/v3/mail/send",
		map[string]any{"to": in.To, "subject": in.Subject, "body": in.Body}, &out)
	return out, err
}

// PostSlackMessage posts to a channel; chat takes no key. Destructive.
func (t *Tools) PostSlackMessage(ctx context.Context, in PostSlackMessageInput) (SlackMessage, error) {
	var out struct {
		SlackMessage
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := t.call(ctx, t.chat, http.MethodPost, t.ep.Chat+"/api/chat.postMessage",
		map[string]any{"channel": in.Channel, "text": in.Text}, &out); err != nil {
		return SlackMessage{}, err
	}
	if !out.OK {
		// Slack answers 200 with ok=false when it did not post: a definite rejection.
		return SlackMessage{}, interceptor.NotCommitted(temporal.NewNonRetryableApplicationError(
			"idemgate/activities: PostSlackMessage: chat refused the message: "+out.Error, "VendorRejected", nil))
	}
	return out.SlackMessage, nil
}

// call sends one request with the activity's ctx (idemhttp needs it for the key) and
// decodes the JSON answer. A 4xx is a non-retryable rejection; anything else that is
// not 2xx is retryable (the gate decides whether a retry may run).
func (t *Tools) call(ctx context.Context, c *http.Client, method, u string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return interceptor.NotCommitted(temporal.NewNonRetryableApplicationError("idemgate/activities: encode request: "+err.Error(), "BadRequest", nil))
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return interceptor.NotCommitted(temporal.NewNonRetryableApplicationError("idemgate/activities: build request: "+err.Error(), "BadRequest", nil))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("idemgate/activities: %s %s: %w", method, redact(u), secrets.ScrubError(err, u))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("idemgate/activities: %s %s: reading the answer: %w", method, redact(u), err)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("idemgate/activities: %s %s: answer is not the expected JSON: %w", method, redact(u), err)
		}
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict &&
		resp.StatusCode != http.StatusTooManyRequests:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/activities: %s %s: vendor rejected the request (%d): %s",
			method, redact(u), resp.StatusCode, strings.TrimSpace(string(raw))), "VendorRejected", nil)
	default:
		return fmt.Errorf("idemgate/activities: %s %s: vendor answered %d: %s", method, redact(u), resp.StatusCode, strings.TrimSpace(string(raw)))
	}
}

// redact shows a vendor URL without its query and without credentials.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		p.RawQuery = ""
		return secrets.Redact(p.String())
	}
	return secrets.Redact(u)
}
