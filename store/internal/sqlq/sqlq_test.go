package sqlq

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

func TestReceiptQuery(t *testing.T) {
	since := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	until := since.Add(time.Hour)
	at := func(t time.Time) any { return t.UnixMicro() }
	every := store.ReceiptFilter{Key: "k", WorkflowID: "wf", Activity: "Charge", Decision: store.DecisionClaimed,
		Since: since, Until: until, AfterID: 7, Limit: 50}
	for _, c := range []struct {
		name string
		f    store.ReceiptFilter
		ph   Placeholder
		tail string
		args []any
	}{
		{"zero, question", store.ReceiptFilter{}, Question, " ORDER BY id", nil},
		{"zero, dollar", store.ReceiptFilter{}, Dollar, " ORDER BY id", nil},
		{"every field, question", every, Question,
			" WHERE key = ? AND workflow_id = ? AND activity = ? AND decision = ? AND time >= ? AND time < ? AND id > ? ORDER BY id LIMIT ?",
			[]any{"k", "wf", "Charge", string(store.DecisionClaimed), since.UnixMicro(), until.UnixMicro(), int64(7), 50}},
		{"every field, dollar", every, Dollar,
			" WHERE key = $1 AND workflow_id = $2 AND activity = $3 AND decision = $4 AND time >= $5 AND time < $6 AND id > $7 ORDER BY id LIMIT $8",
			[]any{"k", "wf", "Charge", string(store.DecisionClaimed), since.UnixMicro(), until.UnixMicro(), int64(7), 50}},
		{"some fields, dollar", store.ReceiptFilter{Activity: "Charge", Until: until, Limit: 3}, Dollar,
			" WHERE activity = $1 AND time < $2 ORDER BY id LIMIT $3", []any{"Charge", until.UnixMicro(), 3}},
		{"cursor only, question", store.ReceiptFilter{AfterID: 9}, Question, " WHERE id > ? ORDER BY id", []any{int64(9)}},
	} {
		tail, args := ReceiptQuery(c.f, c.ph, at)
		if tail != c.tail || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s: got %q %#v, want %q %#v", c.name, tail, args, c.tail, c.args)
		}
	}
}

func TestReceiptQueryConvertsTimes(t *testing.T) {
	since := time.Unix(100, 0)
	_, args := ReceiptQuery(store.ReceiptFilter{Since: since, Until: since.Add(time.Second)}, Dollar,
		func(t time.Time) any { return "t" + t.UTC().Format("05") })
	if want := []any{"t40", "t41"}; !reflect.DeepEqual(args, want) {
		t.Fatalf("args %#v, want %#v", args, want)
	}
}

func TestSweepBatches(t *testing.T) {
	// sweep runs SweepBatches over rows rows and records the batch sizes asked for.
	sweep := func(rows, limit, batch int) (int, []int) {
		var asked []int
		n, err := SweepBatches(limit, batch, func(n int) (int64, error) {
			asked = append(asked, n)
			got := min(n, rows)
			rows -= got
			return int64(got), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, asked
	}
	for _, c := range []struct {
		rows, limit, batch int
		total              int
		asked              []int
	}{
		{rows: 0, limit: 0, batch: 10, total: 0, asked: []int{10}},
		{rows: 25, limit: 0, batch: 10, total: 25, asked: []int{10, 10, 10}},
		{rows: 20, limit: 0, batch: 10, total: 20, asked: []int{10, 10, 10}},
		{rows: 25, limit: 13, batch: 10, total: 13, asked: []int{10, 3}},
		{rows: 25, limit: 20, batch: 10, total: 20, asked: []int{10, 10}},
		{rows: 5, limit: 13, batch: 10, total: 5, asked: []int{10}},
	} {
		total, asked := sweep(c.rows, c.limit, c.batch)
		if total != c.total || !reflect.DeepEqual(asked, c.asked) {
			t.Errorf("%d rows, limit %d, batch %d: removed %d in %v, want %d in %v", c.rows, c.limit, c.batch, total, asked, c.total, c.asked)
		}
	}
}

func TestSweepBatchesStopsAtError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	total, err := SweepBatches(0, 10, func(n int) (int64, error) {
		if calls++; calls == 3 {
			return 0, boom
		}
		return int64(n), nil
	})
	if total != 20 || !errors.Is(err, boom) || calls != 3 {
		t.Fatalf("removed %d, err %v after %d calls; want 20, boom, 3", total, err, calls)
	}
}

func TestReceiptQueryWhere(t *testing.T) {
	at := func(t time.Time) any { return t.UnixMicro() }
	since := time.Unix(100, 0)
	tail, args := ReceiptQueryWhere(store.ReceiptFilter{Since: since, Limit: 5}, Question, at, "id < 42")
	if want := " WHERE id < 42 AND time >= ? ORDER BY id LIMIT ?"; tail != want || !reflect.DeepEqual(args, []any{since.UnixMicro(), 5}) {
		t.Fatalf("got %q %#v, want %q", tail, args, want)
	}
	if tail, _ := ReceiptQueryWhere(store.ReceiptFilter{}, Dollar, at, "id < 42"); tail != " WHERE id < 42 ORDER BY id" {
		t.Fatalf("condition alone: %q", tail)
	}
}
