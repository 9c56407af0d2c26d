package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// TemporalWitnessName names the Temporal-history witness in receipts
// ("witness:temporal") and reports.
const TemporalWitnessName = "temporal"

// HistoryReader is what the Temporal-history witness needs of a Temporal client;
// client.Client is one.
type HistoryReader interface {
	GetWorkflowHistory(ctx context.Context, workflowID, runID string, isLongPoll bool,
		filterType enumspb.HistoryEventFilterType) client.HistoryEventIterator
}

// TemporalWitness returns the witness that reads Temporal's own history: for a
// record whose outcome is unknown, it reads the history of the record's run
// (WorkflowID, RunID) in namespace, finds the ActivityTaskScheduled events whose
// idemgate header gives the record's key as the gate computes it (the minted key,
// a WithKey business key, Options.IdentifyingFields, the tool's name under
// Options.ToolNames, read from the event's input) and whose input hashes to the
// record's ArgsHash (the same key with other arguments is another write), and
// answers Sent with the result of such an event's ActivityTaskCompleted — exactly the payloads the gate
// would have stored. A scheduled event that failed, timed out, was cancelled or is
// still open proves nothing about the vendor: CannotTell. So does a history that
// cannot be read (not found, past the namespace's retention), and a local activity
// (its marker carries no idemgate header, so it cannot be matched to a key safely).
// It never answers NotSent.
//
// opts are the gate's options (ToolNames, IdentifyingFields, DataConverter and
// Effects matter; Store is not needed): with other options a key built from
// identifying fields or a tool's name is not recognised, and the witness cannot
// tell. The gate and the plugin ask it by themselves; `idemgate reconcile` and
// code of one's own use this constructor.
func TemporalWitness(c HistoryReader, namespace string, opts Options) witness.Witness {
	if opts.DataConverter == nil {
		opts.DataConverter = converter.GetDefaultDataConverter()
	}
	if opts.MaxResultSize <= 0 {
		opts.MaxResultSize = DefaultMaxResultSize
	}
	return &temporalWitness{c: c, ns: namespace, o: &opts}
}

type temporalWitness struct {
	c  HistoryReader
	ns string
	o  *Options
}

func (w *temporalWitness) Name() string { return TemporalWitnessName }

// scheduledCall is what the witness learned of one scheduled event with the key.
type scheduledCall struct {
	id    int64
	ended string // "" while open; else the event type that closed it
	endID int64
}

func (w *temporalWitness) Ask(ctx context.Context, q witness.Query) (witness.Answer, error) {
	rec := q.Record
	if rec.WorkflowID == "" {
		return cannotTell("the record names no workflow (a standalone activity has no workflow history)"), nil
	}
	run := fmt.Sprintf("workflow %s run %s", rec.WorkflowID, rec.RunID)
	if rec.RunID == "" {
		run = fmt.Sprintf("workflow %s (latest run)", rec.WorkflowID)
	}
	it := w.c.GetWorkflowHistory(ctx, rec.WorkflowID, rec.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var calls []*scheduledCall
	var others []int64 // scheduled events with the key whose arguments differ (or cannot be read)
	byID := map[int64]*scheduledCall{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				return cannotTell(fmt.Sprintf("the history of %s cannot be read: %v (the run is unknown to namespace %s, "+
					"or past its retention)", run, err, w.ns)), nil
			}
			return witness.Answer{}, fmt.Errorf("reading the history of %s: %w", run, err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := e.GetActivityTaskScheduledEventAttributes()
			if !w.carries(a, rec) {
				continue
			}
			// The same key with other arguments (a write of the key made before this
			// record, past its window) is another write: its result is not this one's.
			if !w.sameArgs(a.GetInput(), rec) {
				others = append(others, e.GetEventId())
				continue
			}
			c := &scheduledCall{id: e.GetEventId()}
			calls = append(calls, c)
			byID[c.id] = c
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := e.GetActivityTaskCompletedEventAttributes()
			c := byID[a.GetScheduledEventId()]
			if c != nil && !rec.CreatedAt.IsZero() && e.GetEventTime().AsTime().Before(rec.CreatedAt.Add(-2*w.skew())) {
				// Completed before this record was first claimed: an earlier write of the key
				// (finished, then forgotten past its window), not the one whose outcome is unknown.
				c.ended, c.endID = "ActivityTaskCompleted before the record was claimed", e.GetEventId()
				continue
			}
			if c != nil {
				ans := witness.Answer{
					Verdict: witness.Sent,
					// nil (an activity that returned nothing): the Asker encodes nil as the gate does.
					Payloads: a.GetResult(),
					Evidence: fmt.Sprintf("%s history event %d: ActivityTaskCompleted of ActivityTaskScheduled %d carrying key %s",
						run, e.GetEventId(), c.id, rec.Key),
				}
				// As the gate: a result over MaxResultSize is not stored (the next attempt is
				// refused with IdempotencyResultNotStored, never run again).
				if size := proto.Size(ans.Payloads); ans.Payloads != nil && size > w.o.MaxResultSize {
					ans.Payloads, ans.NoResult = nil, true
					ans.Evidence += fmt.Sprintf("; its result (%d bytes) is over Options.MaxResultSize (%d) and not stored",
						size, w.o.MaxResultSize)
				}
				return ans, nil
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			w.ended(byID, e.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), "ActivityTaskFailed", e.GetEventId())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			w.ended(byID, e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), "ActivityTaskTimedOut", e.GetEventId())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			w.ended(byID, e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), "ActivityTaskCanceled", e.GetEventId())
		}
	}
	if len(calls) == 0 && len(others) > 0 {
		return cannotTell(fmt.Sprintf("the history of %s schedules key %s only with arguments other than the record's "+
			"(or that cannot be read to compare): events %v", run, rec.Key, others)), nil
	}
	if len(calls) == 0 {
		return cannotTell(fmt.Sprintf("no scheduled activity in the history of %s carries key %s (a local activity's "+
			"marker carries no key, so it is never matched)", run, rec.Key)), nil
	}
	parts := make([]string, len(calls))
	for i, c := range calls {
		if c.ended == "" {
			parts[i] = fmt.Sprintf("event %d is still open", c.id)
		} else {
			parts[i] = fmt.Sprintf("event %d ended %s (event %d)", c.id, c.ended, c.endID)
		}
	}
	return cannotTell(fmt.Sprintf("%s: the activity with key %s never completed: %s; a failure in history proves "+
		"nothing about the vendor", run, rec.Key, strings.Join(parts, ", "))), nil
}

// skew is the clock offset allowed between the history's server and the workers.
func (w *temporalWitness) skew() time.Duration {
	if w.o.ClockSkew > 0 {
		return w.o.ClockSkew
	}
	return DefaultClockSkew
}

func (w *temporalWitness) ended(byID map[int64]*scheduledCall, scheduled int64, how string, id int64) {
	if c := byID[scheduled]; c != nil {
		c.ended, c.endID = how, id
	}
}

func cannotTell(why string) witness.Answer {
	return witness.Answer{Verdict: witness.CannotTell, Evidence: why}
}

// carries reports whether a scheduled activity's key, as the gate computes it from
// its header and input, is rec's.
func (w *temporalWitness) carries(a interface {
	GetHeader() *commonpb.Header
	GetInput() *commonpb.Payloads
	GetActivityType() *commonpb.ActivityType
}, rec store.Record) bool {
	h, ok := readHeader(a.GetHeader().GetFields())
	if !ok {
		return false
	}
	typ := a.GetActivityType().GetName()
	_, tool := w.o.ToolNames[typ]
	needArgs := tool || len(w.o.IdentifyingFields[typ]) > 0
	if !h.HasBusiness && !needArgs && h.Standalone == "" {
		return h.Key == rec.Key // the common case: the minted key, no input to read
	}
	var args []any
	if needArgs {
		var err error
		if args, err = w.decodeArgs(a.GetInput()); err != nil {
			return false // cannot read the input: cannot match it safely
		}
	}
	name, err := w.o.effectiveName(typ, args)
	if err != nil || name != rec.Activity {
		return false
	}
	key, err := w.o.keyOf(keySite{namespace: w.ns, name: name, effect: w.o.Classify(name).Effect,
		workflowID: rec.WorkflowID}, h, true, args)
	return err == nil && key == rec.Key
}

// sameArgs reports whether a scheduled activity's input hashes, canonically as the
// gate hashes arguments, to rec's ArgsHash. An input that cannot be read is not.
func (w *temporalWitness) sameArgs(in *commonpb.Payloads, rec store.Record) bool {
	args, err := w.decodeArgs(in)
	if err != nil {
		return false
	}
	_, hash, err := canon.EncodeHash(args)
	return err == nil && hash == rec.ArgsHash
}

// decodeArgs reads an activity's input as the values canon reads: JSON payloads
// into any with numbers kept exact (json.Number), others through the data
// converter.
func (w *temporalWitness) decodeArgs(in *commonpb.Payloads) ([]any, error) {
	var args []any
	for _, p := range in.GetPayloads() {
		var v any
		if string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingJSON {
			d := json.NewDecoder(bytes.NewReader(p.GetData()))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return nil, err
			}
		} else if err := w.o.DataConverter.FromPayload(p, &v); err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	return args, nil
}

// historySource is a Temporal client and its namespace: the plugin's background
// reconciler asks with the one it captured from an activity.
type historySource struct {
	c  HistoryReader
	ns string
}

type historySourceCtx struct{}

// withHistory makes builtinWitnesses read Temporal's history through s.
func withHistory(ctx context.Context, s historySource) context.Context {
	return context.WithValue(ctx, historySourceCtx{}, s)
}

// builtinWitnesses are the witnesses the gate always asks first: Temporal's
// history, through the worker's client when ctx is an activity's (or the client the
// plugin's reconciler put in ctx). In the SDK's test environment an activity has
// no client: no built-in witness there.
func (r *root) builtinWitnesses(ctx context.Context) []witness.Witness {
	if s, ok := ctx.Value(historySourceCtx{}).(historySource); ok {
		return []witness.Witness{r.temporalWitness(s)}
	}
	s, ok := activityHistory(ctx)
	if !ok {
		return nil
	}
	r.captureHistory(s)
	return []witness.Witness{r.temporalWitness(s)}
}

func (r *root) temporalWitness(s historySource) witness.Witness {
	return &temporalWitness{c: s.c, ns: s.ns, o: &r.opts}
}

// activityHistory is the worker's client of an activity context, if it has one.
func activityHistory(ctx context.Context) (s historySource, ok bool) {
	if !activity.IsActivity(ctx) {
		return s, false
	}
	defer func() {
		if recover() != nil {
			s, ok = historySource{}, false
		}
	}()
	c := activity.GetClient(ctx)
	if c == nil || mockService(c) {
		return s, false
	}
	return historySource{c: c, ns: activity.GetInfo(ctx).Namespace}, true
}

// mockService reports whether c's service is a gomock mock: the SDK's test
// environments (testsuite) hand activities a client over one, and a call it does
// not expect ends the test process (os.Exit in the SDK's test reporter).
func mockService(c client.Client) bool {
	svc := c.WorkflowService()
	if svc == nil {
		return true
	}
	t := reflect.TypeOf(svc)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.HasSuffix(t.PkgPath(), "/workflowservicemock/v1")
}

// historyHolder keeps the first worker client the gate saw in an activity, for the
// plugin's background reconciler (plugins are not handed the client).
type historyHolder struct{ p atomic.Pointer[historySource] }

func (r *root) captureHistory(s historySource) {
	if r.history.p.Load() == nil {
		r.history.p.CompareAndSwap(nil, &s)
	}
}

func (r *root) capturedHistory() (historySource, bool) {
	if p := r.history.p.Load(); p != nil {
		return *p, true
	}
	return historySource{}, false
}
