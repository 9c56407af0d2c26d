package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/internal/textsafe"
	"github.com/idemgate/idemgate/store"
)

type ctxKey struct{}

func withSession(ctx context.Context, sid string) context.Context {
	return context.WithValue(ctx, ctxKey{}, sid)
}

func sessionOf(r *http.Request) string {
	s, _ := r.Context().Value(ctxKey{}).(string)
	return s
}

// opTimeout bounds one page's or action's work against the store.
const opTimeout = 30 * time.Second

// pendingShown caps the blocked writes the first page shows (each reads its key's story).
const pendingShown = 100

type pageTemplate struct{ t *template.Template }

var pageNames = []string{"index", "key", "workflow", "census", "pauses", "confirm", "done", "error", "login"}

func (h *handler) parseTemplates() error {
	funcs := template.FuncMap{
		// vis shows text from outside with its control and bidirectional characters
		// as escapes (internal/textsafe, the CLI's rules); html/template escapes the rest.
		"vis":  func(s string) string { return textsafe.Escape(s, false) },
		"cell": func(s string) string { return textsafe.Escape(s, true) },
		"ts":   operate.TS,
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return h.opts.Now().Sub(t).Round(time.Second).String()
		},
		"short": func(s string, n int) string {
			if r := []rune(s); len(r) > n {
				return string(r[:n-1]) + "…"
			}
			return s
		},
		"keyURL":   func(k string) string { return "key?k=" + url.QueryEscape(k) },
		"wfURL":    func(id string) string { return "workflow?id=" + url.QueryEscape(id) },
		"tui":      h.temporalURL,
		"decision": operate.DecisionText,
		"effect":   operate.EffectCell,
	}
	h.pages = map[string]*pageTemplate{}
	for _, n := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return fmt.Errorf("idemgate/console: template %s: %w", n, err)
		}
		h.pages[n] = &pageTemplate{t: t}
	}
	return nil
}

// temporalURL links a workflow run to the Temporal UI, "" without one.
func (h *handler) temporalURL(workflowID, runID string) string {
	if h.opts.TemporalUIBase == "" || workflowID == "" {
		return ""
	}
	u := h.opts.TemporalUIBase + "/namespaces/" + url.PathEscape(h.opts.Namespace) + "/workflows/" + url.PathEscape(workflowID)
	if runID != "" {
		u += "/" + url.PathEscape(runID)
	}
	return u
}

// page is what every page template gets.
type page struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	Token    bool
	Refresh  int64 // milliseconds; 0: the page does not refresh itself
	Now      time.Time
	Data     any
}

func (h *handler) render(w http.ResponseWriter, r *http.Request, code int, name string, data any) {
	p := page{Nav: name, CSRF: h.csrfToken(sessionOf(r)), ReadOnly: h.opts.ReadOnly, Token: len(h.opts.Token) > 0,
		Now: h.opts.Now(), Data: data}
	switch name {
	case "index", "key", "workflow", "pauses":
		p.Refresh = h.opts.Refresh.Milliseconds()
	}
	var b bytes.Buffer
	if err := h.pages[name].t.Execute(&b, p); err != nil {
		h.opts.Logger.Error("idemgate console: render", "page", name, "err", err)
		http.Error(w, "idemgate console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// fail shows an error page: what went wrong, escaped, and nothing else.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		h.opts.Logger.Error("idemgate console: store", "path", r.URL.Path, "err", err)
	}
	h.render(w, r, code, "error", map[string]any{"Message": err.Error()})
}

// blocked is one pending record as the first page and a key's page show it.
type blocked struct {
	store.Record
	StateText      string
	ResolvableNow  bool
	ResolvableFrom time.Time
	// NotSentFrom is when a person may settle it as not sent (store.NotSentFrom),
	// zero when they may now: for an unknown record it comes after ResolvableFrom.
	NotSentFrom time.Time
	Call        string
	ArgsPretty  string
	// Refusal is the newest refusal's message: it quotes what the witnesses said.
	Refusal     string
	WitnessSaid string
	// Witnesses are the receipts of witnesses on the key (Actor "witness:…").
	Witnesses []store.Receipt
	// Earlier is the newest error an attempt ended with (unknown or released).
	Earlier   string
	Seen      string // a digest of the owner the page showed: an action checks it did not change
	Receipts  int
	OwnerGone bool
}

func ownerDigest(owner string) string {
	s := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(s[:8])
}

func prettyArgs(args []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, args, "", "  ") != nil {
		return string(args)
	}
	return string(textsafe.JSONSafe(b.Bytes()))
}

func (h *handler) describe(ctx context.Context, rec store.Record, now time.Time) (blocked, error) {
	b := blocked{Record: rec, Call: operate.WithheldCall(rec), ArgsPretty: prettyArgs(rec.Args), Seen: ownerDigest(rec.Owner),
		OwnerGone: store.OwnerGone(rec, now)}
	b.ResolvableFrom = operate.ResolvableFrom(rec, now)
	b.ResolvableNow = b.ResolvableFrom.IsZero() && (rec.State == store.StateClaimed || rec.State == store.StateUnknown)
	if rec.State == store.StateClaimed || rec.State == store.StateUnknown {
		b.NotSentFrom = operate.NotSentFrom(rec, now)
	}
	b.StateText = string(rec.State)
	if rec.State == store.StateClaimed {
		if b.OwnerGone {
			b.StateText = "claimed, owner gone: lease passed " + operate.TS(rec.Lease)
		} else {
			b.StateText = "claimed, an attempt was refused; the owner may still be running until " + operate.TS(rec.Lease)
		}
		if rec.MayHaveSent {
			b.StateText += ", taken over from an attempt that may have sent"
		}
	}
	rs, _, err := operate.ListReceipts(ctx, h.st, store.ReceiptFilter{Key: rec.Key}, 0, true)
	if err != nil {
		return b, err
	}
	b.Receipts = len(rs)
	for _, r := range rs {
		switch {
		case r.Decision == store.DecisionRefusedInFlight || r.Decision == store.DecisionGated:
			b.Refusal = r.Error
		case (r.Decision == store.DecisionUnknown || r.Decision == store.DecisionReleased) && r.Error != "":
			b.Earlier = r.Error
		}
		if strings.HasPrefix(r.Actor, "witness:") {
			b.Witnesses = append(b.Witnesses, r)
		}
	}
	if i := strings.Index(b.Refusal, "Witnesses asked: "); i >= 0 {
		b.WitnessSaid = b.Refusal[i+len("Witnesses asked: "):]
		if j := strings.Index(b.WitnessSaid, ". "); j >= 0 {
			b.WitnessSaid = b.WitnessSaid[:j+1]
		}
	}
	return b, nil
}

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	now := h.opts.Now()
	rs, err := operate.Pending(ctx, h.st, now, pendingShown+1, false)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	more := len(rs) > pendingShown
	if more {
		rs = rs[:pendingShown]
	}
	var items []blocked
	for _, rec := range rs {
		b, err := h.describe(ctx, rec, now)
		if err != nil {
			h.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
		items = append(items, b)
	}
	ps, err := h.st.Pauses(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	h.render(w, r, http.StatusOK, "index", map[string]any{"Blocked": items, "More": more, "Pauses": ps, "Shown": pendingShown})
}

func (h *handler) key_(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("k")
	if key == "" {
		seeOther(w, "./")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	now := h.opts.Now()
	data := map[string]any{"Key": key}
	rec, gerr := h.st.Get(ctx, key)
	if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
		h.fail(w, r, http.StatusServiceUnavailable, gerr)
		return
	}
	if gerr == nil {
		b, err := h.describe(ctx, rec, now)
		if err != nil {
			h.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
		data["Record"] = b
		data["Blocked"] = rec.State == store.StateUnknown || rec.State == store.StateClaimed
	}
	story, _, err := operate.ListReceipts(ctx, h.st, store.ReceiptFilter{Key: key}, 0, true)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	if len(story) > 0 {
		data["Summary"] = operate.KeySummary(key, story, rec, gerr)
	}
	slices.Reverse(story) // newest first
	data["Story"] = story
	h.render(w, r, http.StatusOK, "key", data)
}

// write is one key of a workflow, as its newest receipt leaves it.
type write struct {
	Key, Activity, Effect, Last, RunID string
	Attempt                            int32
	Time                               time.Time
	Receipts                           int
}

// workflowShown caps the receipts a workflow's page reads.
const workflowShown = 5000

func (h *handler) workflow(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		seeOther(w, "./")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	rs, more, err := operate.ListReceipts(ctx, h.st, store.ReceiptFilter{WorkflowID: id}, workflowShown, false)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	var writes []*write
	byKey := map[string]*write{}
	runs := map[string]bool{}
	var lastRun string
	for _, rc := range rs {
		if rc.RunID != "" && !runs[rc.RunID] {
			runs[rc.RunID] = true
			lastRun = rc.RunID
		}
		if rc.Key == "" {
			continue
		}
		wr := byKey[rc.Key]
		if wr == nil {
			wr = &write{Key: rc.Key}
			byKey[rc.Key] = wr
			writes = append(writes, wr)
		}
		wr.Activity, wr.Effect, wr.Last, wr.RunID, wr.Attempt, wr.Time = rc.Activity, operate.EffectCell(rc), operate.DecisionText(rc), rc.RunID, rc.Attempt, rc.Time
		wr.Receipts++
	}
	slices.Reverse(rs)
	h.render(w, r, http.StatusOK, "workflow", map[string]any{"ID": id, "Writes": writes, "Receipts": rs, "More": more,
		"Shown": workflowShown, "LastRun": lastRun})
}

// censusSince is how far back the census page looks for activity names in receipts.
const censusSince = 7 * 24 * time.Hour

// censusReceipts caps the receipts the census page reads.
const censusReceipts = 20000

func (h *handler) census(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	rs, more, err := operate.ListReceipts(ctx, h.st, store.ReceiptFilter{Since: h.opts.Now().Add(-censusSince)}, censusReceipts, false)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	var names []string
	recorded := map[string]string{}
	for _, rc := range rs {
		if rc.Activity == "" || rc.Effect == "" {
			continue // pauses, prunes: no class of their own
		}
		if _, ok := recorded[rc.Activity]; !ok {
			names = append(names, rc.Activity)
		}
		recorded[rc.Activity] = operate.EffectCell(rc)
	}
	typed := strings.FieldsFunc(r.URL.Query().Get("names"), func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r' })
	names = append(names, typed...)
	slices.Sort(names)
	names = slices.Compact(names)
	var rep interceptor.CensusReport
	var items []operate.CensusItem
	if len(names) > 0 {
		rep = interceptor.Census(names)
		items = operate.CensusItems(rep, names)
	}
	h.render(w, r, http.StatusOK, "census", map[string]any{"Items": items, "Recorded": recorded, "Summary": rep.String(),
		"Names": strings.Join(typed, " "), "More": more, "Since": censusSince, "Cap": censusReceipts, "Any": len(names) > 0})
}

func (h *handler) pauses(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	ps, err := h.st.Pauses(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	h.render(w, r, http.StatusOK, "pauses", map[string]any{"Pauses": ps})
}

// settle is `idemgate resolve` from the page: operate.Resolve with the console
// user as the actor. "Not sent" first shows the withheld call and asks again.
func (h *handler) settle(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	key, outcome, reason, seen := f.Get("key"), f.Get("outcome"), strings.TrimSpace(f.Get("reason")), f.Get("seen")
	now := h.opts.Now()
	if key == "" || (outcome != "sent" && outcome != "not-sent") {
		h.fail(w, r, http.StatusBadRequest, errors.New("say which key and what happened: sent or not sent. Nothing changed"))
		return
	}
	if reason == "" {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("key %s: a reason is required (what the vendor's dashboard shows, the ticket); it goes into the receipt. Nothing changed", key))
		return
	}
	var result []byte
	if outcome == "sent" {
		var err error
		if result, err = checkResult(f.Get("result")); err != nil {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("key %s: %v. Nothing changed", key, err))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	check := func(rec store.Record) error {
		if seen == "" || ownerDigest(rec.Owner) != seen {
			return fmt.Errorf("key %s changed since the page showed it (now %s, attempt %d): nothing changed. Look at it again", key, rec.State, rec.Attempt)
		}
		return nil
	}
	if outcome == "not-sent" && f.Get("confirm") != "yes" {
		rec, err := h.st.Get(ctx, key)
		if err == nil {
			err = operate.Resolvable(rec, now, false)
		}
		if err == nil {
			err = check(rec)
		}
		if err != nil {
			h.fail(w, r, http.StatusConflict, err)
			return
		}
		b, err := h.describe(ctx, rec, now)
		if err != nil {
			h.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
		h.render(w, r, http.StatusOK, "confirm", map[string]any{"Record": b, "Reason": reason})
		return
	}
	actor := h.actor(r)
	res, err := operate.Resolve(ctx, h.st, operate.Settle{Key: key, Sent: outcome == "sent", Result: result, Actor: actor,
		Reason: reason, Window: h.opts.Window, Now: now, Check: check})
	if err != nil {
		h.opts.Logger.Info("idemgate console: resolve refused", "key", key, "outcome", outcome, "actor", actor, "err", err)
		h.fail(w, r, http.StatusConflict, err)
		return
	}
	h.opts.Logger.Info("idemgate console: resolved", "key", key, "resolution", res.Resolution, "activity", res.Record.Activity,
		"actor", actor, "result_ref", res.Receipt.ResultRef)
	var msg string
	if res.To == store.StateCompleted {
		msg = fmt.Sprintf("Resolved %s as sent by %s: the next attempt of %s returns the stored result (%s) without running; "+
			"the workflow decodes it into the activity's result type.", key, actor, res.Record.Activity, res.Receipt.ResultRef)
	} else {
		msg = fmt.Sprintf("Resolved %s as not sent by %s: the claim is released; the next attempt of %s runs %s once more.",
			key, actor, res.Record.Activity, operate.WithheldCall(res.Record))
	}
	h.render(w, r, http.StatusOK, "done", map[string]any{"Message": msg, "Key": key})
}

// checkResult checks a result typed into the page: JSON, within the size the gate
// stores; compacted.
func checkResult(s string) ([]byte, error) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return nil, errors.New(`give the activity's result as JSON (e.g. "ch_123" or {"id":"ch_123"}), or null for an activity that returns only an error`)
	}
	if len(b) > interceptor.DefaultMaxResultSize {
		return nil, fmt.Errorf("the result is over %d bytes, the largest the gate stores", interceptor.DefaultMaxResultSize)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, fmt.Errorf("the result is not valid JSON (%v): a string needs quotes (\"ch_123\"), an object braces", err)
	}
	return c.Bytes(), nil
}

func (h *handler) scope(r *http.Request) (store.Pause, error) {
	f := r.PostForm
	p := store.Pause{Activity: strings.TrimSpace(f.Get("activity")), Effect: strings.TrimSpace(f.Get("effect")),
		Actor: h.actor(r), Reason: strings.TrimSpace(f.Get("reason")), Time: h.opts.Now()}
	if (p.Activity == "") == (p.Effect == "") {
		return p, errors.New("name exactly one of an activity and an effect class (destructive or idempotent-write). Nothing changed")
	}
	if p.Effect != "" && !operate.PausableEffect(p.Effect) {
		return p, fmt.Errorf("effect %q: use destructive or idempotent-write (reads are never paused). Nothing changed", p.Effect)
	}
	return p, nil
}

// pause is `idemgate pause` from the page.
func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	p, err := h.scope(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	var note string // before the pause: its own receipt names the activity
	if p.Activity != "" {
		if note, err = operate.UnnamedActivityNote(ctx, h.st, p.Activity, p.Time); err != nil {
			h.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
	}
	if err := operate.Pause(ctx, h.st, p); err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	h.opts.Logger.Info("idemgate console: paused", "scope", p.Scope(), "actor", p.Actor, "reason", p.Reason)
	msg := fmt.Sprintf("Paused writes of %s (by %s: %s). Workers refuse them within their pause refresh (2 s by default).",
		p.Scope(), p.Actor, dashIfEmpty(p.Reason))
	if p.Activity != "" && operate.ReadsByName(p.Activity) {
		msg += fmt.Sprintf(" Note: %s reads as a read by its name; reads are never paused — unless the workers' "+
			"Options.Effects makes it a write, this pause changes nothing.", p.Activity)
	}
	if note != "" {
		msg += " Note: " + note + "."
	}
	h.render(w, r, http.StatusOK, "done", map[string]any{"Message": msg, "Pauses": true})
}

// resume is `idemgate resume` from the page.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	p, err := h.scope(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	if err := operate.Resume(ctx, h.st, p); err != nil {
		h.fail(w, r, http.StatusConflict, err)
		return
	}
	h.opts.Logger.Info("idemgate console: resumed", "scope", p.Scope(), "actor", p.Actor)
	h.render(w, r, http.StatusOK, "done", map[string]any{"Message": fmt.Sprintf("Resumed writes of %s (by %s). Workers run them again within their pause refresh.", p.Scope(), p.Actor), "Pauses": true})
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
