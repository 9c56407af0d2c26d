// Package sqlq holds the SQL the two database stores (store/sqlite and
// store/postgres) would otherwise each write out: the receipt filter's query
// and the batched sweep loop.
package sqlq

import (
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Placeholder is a driver's style of bind parameter.
type Placeholder int

const (
	// Question is SQLite's "?".
	Question Placeholder = iota
	// Dollar is PostgreSQL's "$1", "$2", ….
	Dollar
)

// mark is the placeholder of the n-th argument (1-based).
func (p Placeholder) mark(n int) string {
	if p == Dollar {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// ReceiptQuery translates f into the part of a receipt query after
// "FROM idemgate_receipts": the WHERE clause (none when f is zero), "ORDER BY id"
// and the LIMIT, with ph's placeholders, and the arguments they bind. at
// converts Since and Until to the backend's encoding of the time column.
func ReceiptQuery(f store.ReceiptFilter, ph Placeholder, at func(time.Time) any) (tail string, args []any) {
	return ReceiptQueryWhere(f, ph, at, "")
}

// ReceiptQueryWhere is ReceiptQuery with one more condition, cond (no
// placeholders), first in the WHERE clause; "" adds none.
func ReceiptQueryWhere(f store.ReceiptFilter, ph Placeholder, at func(time.Time) any, cond string) (tail string, args []any) {
	where, args := ReceiptWhere(f, ph, at, cond)
	if len(where) > 0 {
		tail = " WHERE " + strings.Join(where, " AND ")
	}
	tail += " ORDER BY id"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		tail += " LIMIT " + ph.mark(len(args))
	}
	return tail, args
}

// ReceiptWhere is the conditions of f (and cond first, when not ""), to be
// joined by AND, with ph's placeholders numbered from 1, and the arguments they
// bind. Limit and Scan are not conditions.
func ReceiptWhere(f store.ReceiptFilter, ph Placeholder, at func(time.Time) any, cond string) (where []string, args []any) {
	if cond != "" {
		where = append(where, cond)
	}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" "+ph.mark(len(args)))
	}
	if f.Key != "" {
		add("key =", f.Key)
	}
	if f.WorkflowID != "" {
		add("workflow_id =", f.WorkflowID)
	}
	if f.Activity != "" {
		add("activity =", f.Activity)
	}
	if f.Decision != "" {
		add("decision =", string(f.Decision))
	}
	if !f.Since.IsZero() {
		add("time >=", at(f.Since))
	}
	if !f.Until.IsZero() {
		add("time <", at(f.Until))
	}
	switch {
	case !f.AfterTime.IsZero():
		// A listing in time order goes on after (AfterTime, AfterID); the plain
		// bound on time lets a time index serve it.
		add("time >=", at(f.AfterTime))
		args = append(args, at(f.AfterTime), f.AfterID)
		where = append(where, "(time, id) > ("+ph.mark(len(args)-1)+", "+ph.mark(len(args))+")")
	case f.AfterID > 0:
		add("id >", f.AfterID)
	}
	if f.ThroughID > 0 {
		add("id <=", f.ThroughID)
	}
	return where, args
}

// Mark is the placeholder of the n-th argument (1-based).
func (p Placeholder) Mark(n int) string { return p.mark(n) }

// SweepBatches removes at most limit rows (limit <= 0: all) by calling run with
// batches of at most batch rows until run removes fewer than it was asked to or
// limit is reached. run reports how many rows it removed; its error ends the
// loop and is returned as is, with the total removed before it.
func SweepBatches(limit, batch int, run func(n int) (int64, error)) (int, error) {
	total := 0
	for limit <= 0 || total < limit {
		n := batch
		if limit > 0 {
			n = min(n, limit-total)
		}
		removed, err := run(n)
		if err != nil {
			return total, err
		}
		total += int(removed)
		if int(removed) < n {
			break
		}
	}
	return total, nil
}
