package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
)

// opTimeout bounds one command's work against the store.
const opTimeout = time.Minute

// businessKey turns --key (with --namespace and --activity, a business key given to
// interceptor.WithKey) into the stored key; without --namespace, --key is the stored key.
func businessKey(key, namespace, activity string) (string, error) {
	if namespace == "" {
		return key, nil
	}
	if key == "" || activity == "" {
		return "", usagef("--namespace turns a business key (the one given to interceptor.WithKey) into the stored key; " +
			"it needs the key and --activity NAME too")
	}
	return interceptor.BusinessKey(namespace, activity, key), nil
}

// receiptJSON is a receipt as --json prints it.
type receiptJSON struct {
	ID         int64           `json:"id"`
	Time       time.Time       `json:"time"`
	Key        string          `json:"key"`
	Activity   string          `json:"activity"`
	Effect     string          `json:"effect"`
	Decision   string          `json:"decision"`
	ArgsHash   string          `json:"args_hash,omitempty"`
	Call       json.RawMessage `json:"call,omitempty"`
	WorkflowID string          `json:"workflow_id,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	Attempt    int32           `json:"attempt,omitempty"`
	ResultRef  string          `json:"result_ref,omitempty"`
	Error      string          `json:"error,omitempty"`
	Actor      string          `json:"actor,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Resolution string          `json:"resolution,omitempty"`
}

func toReceiptJSON(r store.Receipt) receiptJSON {
	j := receiptJSON{ID: r.ID, Time: r.Time.UTC(), Key: r.Key, Activity: r.Activity, Effect: r.Effect,
		Decision: string(r.Decision), ArgsHash: r.ArgsHash, WorkflowID: r.WorkflowID, RunID: r.RunID, Attempt: r.Attempt,
		ResultRef: r.ResultRef, Error: r.Error, Actor: r.Actor, Reason: r.Reason, Resolution: r.Resolution}
	if json.Valid(r.Call) {
		j.Call = r.Call
	}
	return j
}

func (c *cli) receipts(args []string) error {
	if sub, err := c.receiptsSub(args); sub {
		return err
	}
	f := c.newFlags("receipts", "[flags] | export --before T | prune --before T --reason WHY", "Lists the append-only receipts, oldest first.\n"+
		"`idemgate receipts export --help` and `idemgate receipts prune --help`: archive and remove old receipts.", true)
	key := f.String("key", "", "only this key (the stored key; with --namespace and --activity, a business key)")
	ns := f.String("namespace", "", "with --key and --activity: --key is the business key given to interceptor.WithKey in this Temporal namespace")
	wf := f.String("workflow", "", "only this workflow ID")
	act := f.String("activity", "", "only this activity type")
	since := f.Duration("since", 0, "only receipts of the last DURATION (e.g. 1h, 30m)")
	decision := f.String("decision", "", "only this decision: "+decisionList())
	limit := f.Int("limit", 100, "show at most N receipts (0: all)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && (pos[0] == "export" || pos[0] == "prune") {
		return usagef("put %q first: `idemgate receipts %s --before T ...`", pos[0], pos[0])
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: filter with --key, --workflow, --activity, --since, --decision", pos[0])
	}
	if *since < 0 || *limit < 0 {
		return usagef("--since and --limit must not be negative")
	}
	if *decision != "" && !slices.Contains(store.Decisions, store.Decision(*decision)) {
		return usagef("unknown decision %q: use one of %s", *decision, decisionList())
	}
	k, err := businessKey(*key, *ns, *act)
	if err != nil {
		return err
	}
	filter := store.ReceiptFilter{Key: k, WorkflowID: *wf, Activity: *act, Decision: store.Decision(*decision)}
	if *since > 0 {
		filter.Since = c.now().Add(-*since)
	}
	if *limit > 0 {
		filter.Limit = *limit + 1 // one more tells whether there are more
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	rs, err := st.Receipts(ctx, filter)
	if err != nil {
		return err
	}
	more := *limit > 0 && len(rs) > *limit
	if more {
		rs = rs[:*limit]
	}
	if f.json {
		out := make([]receiptJSON, 0, len(rs))
		for _, r := range rs {
			out = append(out, toReceiptJSON(r))
		}
		return c.printJSON(out)
	}
	if len(rs) == 0 {
		fmt.Fprintln(c.stdout, "no receipts match")
		return nil
	}
	tw := c.table()
	row(tw, "TIME", "KEY", "ACTIVITY", "EFFECT", "WORKFLOW/RUN", "ATTEMPT", "DECISION", "ARGS HASH", "RESULT", "NOTE")
	for _, r := range rs {
		d := string(r.Decision)
		if r.Resolution != "" {
			d += " (" + r.Resolution + ")"
		}
		note := r.Error
		if r.Actor != "" || r.Reason != "" {
			note = strings.TrimSpace(fmt.Sprintf("by %s: %s %s", dash(r.Actor), r.Reason, note))
		}
		note += pruneNote(r)
		run := "-"
		if r.WorkflowID != "" {
			run = r.WorkflowID + "/" + clip(r.RunID, 8)
		}
		attempt := "-"
		if r.Attempt > 0 {
			attempt = fmt.Sprint(r.Attempt)
		}
		row(tw, ts(r.Time), r.Key, r.Activity, r.Effect, run, attempt, d, clip(r.ArgsHash, 12), r.ResultRef, clip(note, 100))
	}
	tw.Flush()
	if more {
		fmt.Fprintf(c.stderr, "showing the first %d receipts; narrow with --since, --key, --workflow or raise --limit\n", *limit)
	}
	return nil
}

func decisionList() string {
	var s []string
	for _, d := range store.Decisions {
		s = append(s, string(d))
	}
	return strings.Join(s, ", ")
}

// recordJSON is a pending record as --json prints it.
type recordJSON struct {
	Key        string          `json:"key"`
	Activity   string          `json:"activity"`
	Effect     string          `json:"effect"`
	State      string          `json:"state"`
	Args       json.RawMessage `json:"args"`
	Call       string          `json:"call"`
	ArgsHash   string          `json:"args_hash"`
	WorkflowID string          `json:"workflow_id"`
	RunID      string          `json:"run_id"`
	Attempt    int32           `json:"attempt"`
	Claims     int             `json:"claims"`
	Owner      string          `json:"owner"`
	Lease      time.Time       `json:"lease"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	ExpiresAt  time.Time       `json:"expires_at"`
}

// withheldCall is the call the gate withholds for r, printed as the gate prints it.
func withheldCall(r store.Record) string {
	return interceptor.WithheldCall{Activity: r.Activity, Key: r.Key, Effect: r.Effect, Args: r.Args}.String()
}

func (c *cli) pending(args []string) error {
	f := c.newFlags("pending", "[flags]", "Lists every claim whose outcome is unknown and that blocks its key\n"+
		"(state unknown, or claimed with its lease passed), oldest first, with the withheld call.", true)
	limit := f.Int("limit", 0, "show at most N (0: all)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	now := c.now()
	rs, err := st.Pending(ctx, now, *limit)
	if err != nil {
		return err
	}
	if f.json {
		out := make([]recordJSON, 0, len(rs))
		for _, r := range rs {
			j := recordJSON{Key: r.Key, Activity: r.Activity, Effect: r.Effect, State: string(r.State), Call: withheldCall(r),
				ArgsHash: r.ArgsHash, WorkflowID: r.WorkflowID, RunID: r.RunID, Attempt: r.Attempt, Claims: r.Claims,
				Owner: r.Owner, Lease: r.Lease.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}
			if json.Valid(r.Args) {
				j.Args = r.Args
			}
			out = append(out, j)
		}
		return c.printJSON(out)
	}
	if len(rs) == 0 {
		fmt.Fprintln(c.stdout, "nothing pending: no claim with an unknown outcome blocks its key")
		return nil
	}
	tw := c.table()
	row(tw, "SINCE", "AGE", "KEY", "ACTIVITY", "EFFECT", "STATE", "WORKFLOW/RUN", "ATTEMPT", "WITHHELD CALL")
	for _, r := range rs {
		state := string(r.State)
		if r.State == store.StateClaimed {
			state = "claimed, lease passed " + ts(r.Lease)
		}
		row(tw, ts(r.CreatedAt), now.Sub(r.CreatedAt).Round(time.Second).String(), r.Key, r.Activity, r.Effect, state,
			r.WorkflowID+"/"+clip(r.RunID, 8), fmt.Sprint(r.Attempt), withheldCall(r))
	}
	tw.Flush()
	fmt.Fprintln(c.stdout, "\nCheck each with the vendor, then: idemgate resolve KEY --sent --result FILE --reason WHY"+
		"   or   idemgate resolve KEY --not-sent --reason WHY")
	return nil
}

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
	if err := resolvable(rec, now); err != nil {
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

// resolvable says, in the operator's words, why a record cannot be resolved.
func resolvable(r store.Record, now time.Time) error {
	switch {
	case r.State == store.StateCompleted:
		return fmt.Errorf("key %s is already completed (%s, attempt %d of workflow %s): nothing to resolve, nothing changed. "+
			"Its history: `idemgate receipts --key %s`", r.Key, ts(r.UpdatedAt), r.Attempt, r.WorkflowID, r.Key)
	case r.State == store.StateReleased:
		return fmt.Errorf("key %s is already released (%s): the next attempt runs the write; nothing changed. "+
			"Its history: `idemgate receipts --key %s`", r.Key, ts(r.UpdatedAt), r.Key)
	case r.State == store.StateClaimed && !store.Resolvable(r, now):
		// Until the lease plus store.LeaseMargin: a worker whose clock runs behind may still send.
		return fmt.Errorf("key %s is held by attempt %d of workflow %s, which may still be running until %s: "+
			"its outcome is not unknown yet. Nothing changed; wait for the attempt, then look at `idemgate pending`",
			r.Key, r.Attempt, r.WorkflowID, ts(r.Lease.Add(store.LeaseMargin)))
	case r.State != store.StateUnknown && r.State != store.StateClaimed:
		return fmt.Errorf("key %s is in state %q, which resolve does not know; nothing changed", r.Key, r.State)
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

// pauseJSON is a pause as --json prints it.
type pauseJSON struct {
	Activity string    `json:"activity,omitempty"`
	Effect   string    `json:"effect,omitempty"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason"`
	Time     time.Time `json:"time"`
}

func (c *cli) pauseFlags(name, about string, args []string) (*flags, store.Pause, error) {
	f := c.newFlags(name, "--activity NAME | --effect destructive|idempotent-write [flags]", about, true)
	act := f.String("activity", "", "the activity type")
	eff := f.String("effect", "", "every activity of this class: destructive or idempotent-write")
	reason := f.String("reason", "", "why; every refused write quotes it")
	actor := f.String("actor", "", "who (default: the OS user)")
	pos, err := f.parse(args)
	if err != nil {
		return nil, store.Pause{}, err
	}
	if len(pos) > 0 {
		return nil, store.Pause{}, usagef("unexpected argument %q: name what with --activity NAME or --effect CLASS", pos[0])
	}
	if (*act == "") == (*eff == "") {
		return nil, store.Pause{}, usagef("name exactly one of --activity NAME and --effect destructive|idempotent-write")
	}
	if *eff != "" {
		e, err := interceptor.ParseEffect(*eff)
		if err != nil || e == interceptor.Read {
			return nil, store.Pause{}, usagef("--effect %q: use destructive or idempotent-write (reads are never paused)", *eff)
		}
	}
	return f, store.Pause{Activity: *act, Effect: *eff, Actor: c.actor(*actor), Reason: strings.TrimSpace(*reason), Time: c.now()}, nil
}

func (c *cli) pause(args []string) error {
	f, p, err := c.pauseFlags("pause", "Stops every worker from running the writes of an activity or an effect class, within\n"+
		"the workers' Options.PauseRefresh (2 s by default), without a restart. Refused writes fail with a\n"+
		"retryable WriteGated that says who paused, when and why. Reads are never paused.", args)
	if err != nil {
		return err
	}
	if p.Activity != "" {
		if cl := interceptor.Classify(p.Activity); cl.Effect == interceptor.Read {
			fmt.Fprint(c.stderr, escape(fmt.Sprintf("note: %s reads as a read by its name; reads are never paused — unless the workers' "+
				"Options.Effects makes it a write, this pause changes nothing\n", p.Activity), false))
		}
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	if err := st.Pause(ctx, p); err != nil {
		return err
	}
	if f.json {
		return c.printJSON(pauseJSON(p))
	}
	c.printf("paused writes of %s (by %s: %s). Workers refuse them within their pause refresh (2 s by "+
		"default). Lift it with `idemgate resume %s`.\n", p.Scope(), p.Actor, dash(p.Reason), scopeFlag(p))
	return nil
}

func scopeFlag(p store.Pause) string {
	if p.Activity != "" {
		return "--activity " + p.Activity
	}
	return "--effect " + p.Effect
}

func (c *cli) resume(args []string) error {
	f, p, err := c.pauseFlags("resume", "Lifts a pause: workers run the writes again within their pause refresh.", args)
	if err != nil {
		return err
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	if err := st.Resume(ctx, p); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s is not paused; nothing changed. See what is: `idemgate pauses`", p.Scope())
	} else if err != nil {
		return err
	}
	if f.json {
		return c.printJSON(pauseJSON(p))
	}
	c.printf("resumed writes of %s (by %s). Workers run them again within their pause refresh.\n", p.Scope(), p.Actor)
	return nil
}

func (c *cli) pauses(args []string) error {
	f := c.newFlags("pauses", "[flags]", "Lists the pauses in force.", true)
	if err := f.parseNone(args); err != nil {
		return err
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	ps, err := st.Pauses(ctx)
	if err != nil {
		return err
	}
	if f.json {
		out := make([]pauseJSON, 0, len(ps))
		for _, p := range ps {
			out = append(out, pauseJSON(p))
		}
		return c.printJSON(out)
	}
	if len(ps) == 0 {
		fmt.Fprintln(c.stdout, "nothing is paused")
		return nil
	}
	tw := c.table()
	row(tw, "PAUSED", "SINCE", "BY", "REASON")
	for _, p := range ps {
		row(tw, p.Scope(), ts(p.Time), p.Actor, p.Reason)
	}
	return tw.Flush()
}

// censusJSON is the census as --json prints it.
type censusJSON struct {
	Read            int          `json:"read"`
	IdempotentWrite int          `json:"idempotent_write"`
	Destructive     int          `json:"destructive"`
	Review          []string     `json:"review"`
	Contradicts     []string     `json:"contradicts"`
	Activities      []censusItem `json:"activities"`
}

type censusItem struct {
	Name   string `json:"name"`
	Effect string `json:"effect"`
	Verb   string `json:"verb,omitempty"`
	Word   string `json:"word,omitempty"` // the word the decision rests on
	Rule   string `json:"rule"`           // interceptor.Source: verb, phrasal, none, …
	Reason string `json:"reason"`
	Review bool   `json:"review"`
	// Hints is the class the activity's annotations claim (MCP), when any.
	Hints       string `json:"hints,omitempty"`
	Contradicts bool   `json:"contradicts,omitempty"`
}

func (c *cli) census(args []string) error {
	f := c.newFlags("census", "[--strict] NAME... | --mcp URL | --mcp-command CMD", "Classifies activity names as the gate does (no Options.Effects overrides), prints the word\n"+
		"that decided and why, and flags the names whose grammar cannot tell (no known verb, a verb out of\n"+
		"place, a verb that reads or writes): they count as destructive, or the more severe reading, until a\n"+
		"person confirms them. With --mcp or --mcp-command it lists an MCP server's tools and classifies each\n"+
		"as the bridge registers it (mcp.SERVER.TOOL), its annotations beside the name's class: they may\n"+
		"tighten the class, never lower it, and give a class to a name with no known verb.", false)
	strict := f.Bool("strict", false, "exit 1 when any name is flagged for review, or (MCP) a tool's annotations contradict its name")
	mcpURL := f.String("mcp", "", "an MCP server's streamable HTTP URL")
	mcpCmd := f.String("mcp-command", "", "an MCP server's command (run over stdio; split at spaces)")
	mcpName := f.String("mcp-name", "server", "the server's name in activity names")
	names, err := f.parse(args)
	if err != nil {
		return err
	}
	var rep interceptor.CensusReport
	if *mcpURL != "" || *mcpCmd != "" {
		if len(names) > 0 || *mcpURL != "" && *mcpCmd != "" {
			return usagef("give either names, --mcp URL or --mcp-command CMD")
		}
		var tr mcp.Transport
		if *mcpURL != "" {
			tr = &mcp.StreamableClientTransport{Endpoint: *mcpURL, MaxRetries: -1}
		} else if tr, err = mcptools.Transport(*mcpCmd); err != nil {
			return usagef("--mcp-command: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := mcptools.Dial(ctx, *mcpName, tr, mcptools.Options{})
		if err != nil {
			return err
		}
		defer b.Session().Close()
		rep, names = b.Census(interceptor.Options{}), b.Names()
	} else {
		if len(names) == 0 {
			return usagef("give the activity names to classify, e.g. `idemgate census ChargeCard GetBalance`, or an MCP server with --mcp URL")
		}
		rep = interceptor.Census(names)
	}
	var items []censusItem
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		cl := rep.Effects[n]
		it := censusItem{Name: n, Effect: cl.Effect.String(), Verb: cl.Verb, Word: cl.Word,
			Rule: cl.Source.String(), Reason: cl.Reason(), Review: cl.Review, Contradicts: cl.Contradicts}
		if cl.Hinted != 0 {
			it.Hints = cl.Hinted.String()
		}
		items = append(items, it)
	}
	if f.json {
		if err := c.printJSON(censusJSON{Read: rep.Read, IdempotentWrite: rep.IdempotentWrite, Destructive: rep.Destructive,
			Review: append([]string{}, rep.Review...), Contradicts: append([]string{}, rep.Contradicts...), Activities: items}); err != nil {
			return err
		}
	} else {
		tw := c.table()
		row(tw, "ACTIVITY", "EFFECT", "WORD", "HINTS", "REVIEW", "REASON")
		for _, it := range items {
			review := ""
			if it.Review {
				review = "needs review"
			}
			hints := dash(it.Hints)
			if it.Contradicts {
				hints += " (contradicts the name)"
			}
			row(tw, it.Name, it.Effect, dash(it.Word), hints, review, it.Reason)
		}
		tw.Flush()
		c.printf("%s\n", rep.String())
	}
	if *strict && (len(rep.Review) > 0 || len(rep.Contradicts) > 0) {
		var why []string
		for _, n := range rep.Review {
			why = append(why, "  "+n+": "+rep.Effects[n].Reason())
		}
		for _, n := range rep.Contradicts {
			cl := rep.Effects[n]
			why = append(why, fmt.Sprintf("  %s: the name reads %s, its annotations say %s", n, cl.Effect, cl.Hinted))
		}
		var what []string
		if len(rep.Review) > 0 {
			what = append(what, fmt.Sprintf("%d name(s) need review: %s", len(rep.Review), strings.Join(rep.Review, ", ")))
		}
		if len(rep.Contradicts) > 0 {
			what = append(what, fmt.Sprintf("%d tool(s) have annotations that contradict their name: %s",
				len(rep.Contradicts), strings.Join(rep.Contradicts, ", ")))
		}
		return fmt.Errorf("--strict: %s. Rename them so the verb comes first, fix the annotations, or classify them "+
			"in the workers' Options.Effects:\n%s", strings.Join(what, "; "), strings.Join(why, "\n"))
	}
	return nil
}

func (c *cli) sweep(args []string) error {
	f := c.newFlags("sweep", "[flags]", "Removes the records past their window once (receipts are kept) and reports how many.", true)
	limit := f.Int("limit", 0, "remove at most N (0: all that expired)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	now := c.now()
	n, err := st.Sweep(ctx, now, *limit)
	if err != nil {
		return fmt.Errorf("sweep (removed %d before the error): %w", n, err)
	}
	if f.json {
		return c.printJSON(map[string]any{"removed": n, "now": now.UTC(), "limit": *limit})
	}
	fmt.Fprintf(c.stdout, "removed %d expired record(s) (expired at or before %s); their receipts are kept\n", n, ts(now))
	return nil
}
