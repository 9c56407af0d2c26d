package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

func (c *cli) resolve(args []string) error {
	f := c.newFlags("resolve", "KEY (--sent --result FILE|- | --not-sent) --reason WHY [flags]",
		"Settles a pending key, owner-checked. --sent: the write happened; the result is stored and the next\n"+
			"attempt returns it without running. --not-sent: it did not; the next attempt runs the write once more.", true)
	sent := f.Bool("sent", false, "the write happened: store --result so the next attempt returns it")
	notSent := f.Bool("not-sent", false, "the write did not happen: release the claim so the next attempt runs")
	resultPath := f.String("result", "", "with --sent: a file holding the activity's result as JSON (- for standard input; null when it returns only an error)")
	reason := f.String("reason", "", "why (required): what the vendor said, the ticket")
	actor := f.String("actor", "", "who resolves (default: the OS user)")
	ns := f.String("namespace", "", "with --activity: KEY is the business key given to interceptor.WithKey in this Temporal namespace")
	act := f.String("activity", "", "with --namespace: the activity type of the business key")
	window := f.Duration("window", interceptor.DefaultWindow, "with --sent: how long the stored result is remembered (the worker's Options.Window)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("which key? Give the KEY from `idemgate pending` (or from the refusal's message)")
	case len(pos) > 1:
		return usagef("one KEY at a time; got %q", pos)
	case *sent == *notSent:
		return usagef("say what happened: --sent (the write reached the vendor) or --not-sent (it did not), exactly one")
	case strings.TrimSpace(*reason) == "":
		return usagef("--reason is required: say why (what the vendor's dashboard shows, the ticket), it goes into the receipt")
	case *notSent && *resultPath != "":
		return usagef("--result goes with --sent only: a write that did not happen has no result")
	case *sent && *resultPath == "":
		return usagef("--sent needs --result FILE: the activity's result as JSON, which the next attempt returns " +
			"(- reads standard input; give a file holding null for an activity that returns only an error)")
	case *window <= 0:
		return usagef("--window must be positive")
	}
	if (*ns == "") != (*act == "") {
		return usagef("--namespace and --activity go together: they turn a business key into the stored key")
	}
	key, err := businessKey(pos[0], *ns, *act)
	if err != nil {
		return err
	}
	var result []byte
	if *sent {
		if result, err = c.readResult(*resultPath); err != nil {
			return err
		}
	}

	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	rec, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no record for key %s: it was never claimed, or swept after its window. Nothing changed. "+
			"Check the key with `idemgate pending` or `idemgate receipts --key %s`", key, key)
	}
	if err != nil {
		return err
	}
	now := c.now()
	if err := resolvable(rec, now, *sent); err != nil {
		return err
	}
	to, resolution := store.StateReleased, store.ResolvedNotSent
	t := store.Transition{Key: key, Owner: rec.Owner, Now: now, Window: *window}
	t.Receipt = store.Receipt{Time: now, Key: key, Activity: rec.Activity, Effect: rec.Effect, Decision: store.DecisionResolved,
		ArgsHash: rec.ArgsHash, WorkflowID: rec.WorkflowID, RunID: rec.RunID, Attempt: rec.Attempt,
		Actor: c.actor(*actor), Reason: strings.TrimSpace(*reason)}
	if *sent {
		to, resolution = store.StateCompleted, store.ResolvedSent
		var v any // nil for JSON null: exactly what the gate stores for a nil result
		if string(result) != "null" {
			v = json.RawMessage(result)
		}
		if t.Result, t.Receipt.ResultRef, err = interceptor.EncodeResult(nil, v); err != nil {
			return fmt.Errorf("encode the result: %v. Nothing changed", err)
		}
	}
	t.Receipt.Resolution = resolution
	if err := st.Resolve(ctx, t, to); err != nil {
		if errors.Is(err, store.ErrNotOwner) || errors.Is(err, store.ErrNotFound) {
			now, _ := st.Get(ctx, key)
			return fmt.Errorf("key %s changed while it was being resolved (now %s, attempt %d); nothing changed. "+
				"Look again with `idemgate receipts --key %s`", key, dash(string(now.State)), now.Attempt, key)
		}
		return err
	}
	if f.json {
		return c.printJSON(map[string]any{"key": key, "resolution": resolution, "state": to, "activity": rec.Activity,
			"actor": t.Receipt.Actor, "reason": t.Receipt.Reason, "result_ref": t.Receipt.ResultRef})
	}
	if *sent {
		c.printf("resolved %s as sent by %s: the next attempt of %s returns the stored result (%s) without "+
			"running; the workflow decodes it into the activity's result type.\n", key, t.Receipt.Actor, rec.Activity, t.Receipt.ResultRef)
	} else {
		c.printf("resolved %s as not sent by %s: the claim is released; the next attempt of %s runs %s once more.\n",
			key, t.Receipt.Actor, rec.Activity, withheldCall(rec))
	}
	return nil
}

// resolvable says, in the operator's words, why a record cannot be resolved as
// sent (sent) or not sent.
func resolvable(r store.Record, now time.Time, sent bool) error {
	switch {
	case r.State == store.StateCompleted:
		return fmt.Errorf("key %s is already completed (%s, attempt %d of workflow %s): nothing to resolve, nothing changed. "+
			"Its history: `idemgate receipts --key %s`", r.Key, ts(r.UpdatedAt), r.Attempt, r.WorkflowID, r.Key)
	case r.State == store.StateReleased:
		return fmt.Errorf("key %s is already released (%s): the next attempt runs the write; nothing changed. "+
			"Its history: `idemgate receipts --key %s`", r.Key, ts(r.UpdatedAt), r.Key)
	case r.State == store.StateClaimed && !store.Resolvable(r, now):
		// Until the lease plus store.LeaseMargin: a worker whose clock runs behind may still send.
		from := store.ResolvableFrom(r)
		owner := fmt.Sprintf("its lease (the attempt's deadline plus twice the clock skew) passed at %s", ts(r.Lease))
		if now.Before(r.Lease) {
			owner = fmt.Sprintf("it may still be running until its lease (the attempt's deadline plus twice the clock skew) at %s", ts(r.Lease))
		}
		// The look at the vendor must come from then on too: one before can miss the
		// attempt's late request, and a --not-sent typed later would still be let
		// through (claimmodel's TestPersonWhoLookedEarlySettlesWrong).
		return fmt.Errorf("key %s is claimed by attempt %d of workflow %s: %s. A worker whose clock runs behind may "+
			"still send until %s after the lease, so a person may resolve this key from %s (in %s): the lease plus %s. "+
			"Nothing changed. Next step: look the write up at the vendor at or after %s, not before (a look before then "+
			"can miss the attempt's request still on its way, and a --not-sent resting on it sends the write twice), "+
			"then run this resolve again",
			r.Key, r.Attempt, r.WorkflowID, owner, store.LeaseMargin, ts(from), from.Sub(now).Round(time.Second),
			store.LeaseMargin, ts(from))
	case r.State != store.StateUnknown && r.State != store.StateClaimed:
		return fmt.Errorf("key %s is in state %q, which resolve does not know; nothing changed", r.Key, r.State)
	case !sent && !store.NotSentResolvable(r, now):
		// An unknown record: the attempt gave up without proof, but a request it wrote
		// just before may still land until its lease plus the margin (atk-op finding 4).
		from := store.NotSentFrom(r)
		return fmt.Errorf("key %s: attempt %d of workflow %s ended without proof of whether %s reached the vendor, and a "+
			"request it wrote just before may still land until %s (its lease, %s, plus %s). --sent may be given now (when "+
			"the vendor shows the write); --not-sent only from %s (in %s). Nothing changed. Next step: look the write up "+
			"at the vendor at or after %s, not before (a look before then can miss the request still on its way, and a "+
			"--not-sent resting on it sends the write twice), then run this resolve again",
			r.Key, r.Attempt, r.WorkflowID, r.Activity, ts(from), ts(r.Lease), store.LeaseMargin, ts(from),
			from.Sub(now).Round(time.Second), ts(from))
	}
	return nil
}

// readResult reads and checks the --result file before anything is opened.
func (c *cli) readResult(path string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(c.stdin, interceptor.DefaultMaxResultSize+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read the result %s: %v. Nothing changed; give a readable file, or - for standard input", path, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, usagef("the result %s is empty. Give the activity's result as JSON (e.g. \"ch_123\" or {\"id\":\"ch_123\"}), "+
			"or null for an activity that returns only an error", path)
	}
	if !json.Valid(b) {
		var syn *json.SyntaxError
		where := ""
		if err := json.Unmarshal(b, new(any)); errors.As(err, &syn) {
			where = fmt.Sprintf(" at byte %d", syn.Offset)
		}
		return nil, usagef("the result %s is not valid JSON%s (it starts %q). Nothing changed. Give the activity's "+
			"result as JSON: a string needs quotes (\"ch_123\"), an object braces", path, where, clip(string(b), 40))
	}
	if len(b) > interceptor.DefaultMaxResultSize {
		return nil, usagef("the result %s is over %d bytes, the largest the gate stores", path, interceptor.DefaultMaxResultSize)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, usagef("the result %s: %v", path, err)
	}
	return compact.Bytes(), nil
}
