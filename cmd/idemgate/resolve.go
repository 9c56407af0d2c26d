package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
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
	res, err := operate.Resolve(ctx, st, operate.Settle{Key: key, Sent: *sent, Result: result, Actor: c.actor(*actor),
		Reason: *reason, Window: *window, Now: c.now()})
	if err != nil {
		return err
	}
	rec, rc := res.Record, res.Receipt
	if f.json {
		return c.printJSON(map[string]any{"key": key, "resolution": res.Resolution, "state": res.To, "activity": rec.Activity,
			"actor": rc.Actor, "reason": rc.Reason, "result_ref": rc.ResultRef})
	}
	if *sent {
		c.printf("resolved %s as sent by %s: the next attempt of %s returns the stored result (%s) without "+
			"running; the workflow decodes it into the activity's result type.\n", key, rc.Actor, rec.Activity, rc.ResultRef)
	} else {
		c.printf("resolved %s as not sent by %s: the claim is released; the next attempt of %s runs %s once more.\n",
			key, rc.Actor, rec.Activity, withheldCall(rec))
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
