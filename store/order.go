package store

import "slices"

// ReadsAtTheirTime orders receipts listed in append order (as Receipts lists them)
// for a person reading a story: the receipt of a read (Effect "read", Decision
// DecisionRan), which the gate appends in a batch up to a flush interval after the
// read ran, moves back to its Time among the others; every other receipt keeps its
// place in append order. Their times come from the clocks of several workers,
// which may disagree: a takeover stays after the unknown outcome it took over,
// whatever their stamps say. rs is not changed.
func ReadsAtTheirTime(rs []Receipt) []Receipt {
	var reads, others []Receipt
	for _, r := range rs {
		if IsReadReceipt(r) {
			reads = append(reads, r)
		} else {
			others = append(others, r)
		}
	}
	if len(reads) == 0 {
		return rs
	}
	slices.SortStableFunc(reads, func(a, b Receipt) int { return a.Time.Compare(b.Time) })
	if len(others) == 0 {
		return reads
	}
	out := make([]Receipt, 0, len(rs))
	for len(reads) > 0 || len(others) > 0 {
		if len(others) == 0 || len(reads) > 0 && reads[0].Time.Before(others[0].Time) {
			out, reads = append(out, reads[0]), reads[1:]
		} else {
			out, others = append(out, others[0]), others[1:]
		}
	}
	return out
}

// IsReadReceipt reports whether r is the receipt of a read that ran (Effect
// "read", Decision DecisionRan): the only receipt a durable store may leave
// unsynced where its own crash, not only its machine's, loses unsynced commits
// (store/postgres). Every other receipt records a write's step or a refusal.
func IsReadReceipt(r Receipt) bool { return r.Effect == "read" && r.Decision == DecisionRan }
