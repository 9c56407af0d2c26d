package llmagent_test

import (
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/examples/recipes/llmagent"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/vendorsim"
)

// planners make each provider's planner activity on its official client, pointed
// at the scripted model at url.
var planners = map[string]func(url string) any{
	"openai": func(url string) any {
		return &llmagent.OpenAIPlanner{Model: openai.ChatModelGPT5_5,
			Client: openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("test-key"))}
	},
	"anthropic": func(url string) any {
		return &llmagent.ClaudePlanner{Model: anthropic.ModelClaudeSonnet5_5,
			Client: anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("test-key"))}
	},
}

// noProviderEnv keeps the clients from reading settings (a base URL, a key, a
// profile) from the machine's environment: they talk only to the scripted model.
func noProviderEnv(t *testing.T) {
	for _, name := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
		"OPENAI_WEBHOOK_SECRET", "OPENAI_CUSTOM_HEADERS", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
		"ANTHROPIC_WEBHOOK_SIGNING_KEY", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_PROFILE"} {
		t.Setenv(name, "") // restored when the test ends
		os.Unsetenv(name)
	}
}

// The model asks for the customer, then for the charge. The charge's first attempt
// reaches the card processor, and the worker dies before anything is recorded
// (CrashAfterVendor). With the processor's deduplication declared
// (VendorWindows), the retry re-sends with the same key and the processor answers
// with the first charge: one charge, and the model is told its ID. Without it, the
// gate refuses the retry and the loop stops for a person: still one charge.
func TestAgentChargesOnceThroughACrash(t *testing.T) {
	noProviderEnv(t)
	for _, provider := range []string{"openai", "anthropic"} {
		for _, dedup := range []bool{true, false} {
			name := provider + "/vendor-deduplicates"
			if !dedup {
				name = provider + "/vendor-does-not-deduplicate"
			}
			t.Run(name, func(t *testing.T) {
				w, err := vendorsim.Start()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				model := &scriptedModel{t: t, provider: provider}
				srv := httptest.NewServer(model)
				defer srv.Close()
				tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
					Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
				if err != nil {
					t.Fatal(err)
				}
				var opts interceptor.Options
				if dedup {
					opts.VendorWindows = map[string]time.Duration{"ChargeCard": idemhttp.Stripe.Window}
				}
				k := idemgatetest.New(t, idemgatetest.WithOptions(opts))
				k.CrashAfterVendor("ChargeCard")

				env := k.NewWorkflowEnvironment()
				env.RegisterWorkflow(llmagent.AgentWorkflow)
				env.RegisterActivity(tools)
				env.RegisterActivity(planners[provider](srv.URL))
				env.ExecuteWorkflow(llmagent.AgentWorkflow, "Charge customer cus_42 EUR 42.00 for the Pro plan.", 0)
				var res llmagent.AgentResult
				if err := env.GetWorkflowResult(&res); err != nil {
					t.Fatalf("workflow: %v", err)
				}

				if w.Payments.Total() != 1 {
					t.Fatalf("%d charges, want 1", w.Payments.Total())
				}
				var ds []string
				for _, d := range k.Decisions("ChargeCard") {
					ds = append(ds, d.Decision)
				}
				if dedup {
					if res.Stopped != "done" || !strings.Contains(res.Answer, "(ch_") {
						t.Fatalf("stopped %q, answer %q; want done, with the charge's ID", res.Stopped, res.Answer)
					}
					if want := []string{"unknown", "ran"}; !slices.Equal(ds, want) || w.Payments.Replays() != 1 {
						t.Fatalf("ChargeCard %v, processor replays %d; want %v and the re-send answered from its store", ds, w.Payments.Replays(), want)
					}
					if model.Requests() != 3 {
						t.Fatalf("the model was asked %d times, want 3", model.Requests())
					}
					return
				}
				if res.Stopped != interceptor.ErrTypeInFlight {
					t.Fatalf("stopped %q, want %s", res.Stopped, interceptor.ErrTypeInFlight)
				}
				if want := []string{"unknown", "refused-in-flight"}; !slices.Equal(ds, want) {
					t.Fatalf("ChargeCard %v, want %v", ds, want)
				}
				if last := res.Calls[len(res.Calls)-1]; last.Tool != "ChargeCard" || !strings.Contains(last.Error, "Next step") {
					t.Fatalf("last call %+v, want the refused charge with the gate's next step", last)
				}
				if model.Requests() != 2 {
					t.Fatalf("the model was asked %d times, want 2 (the loop stopped at the refusal)", model.Requests())
				}
			})
		}
	}
}
