package store

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"
)

// Pruner is implemented by stores that can remove old receipts: retention as an
// operator's act, never the gate's. A store.Store need not implement it.
//
// Prune removes the receipts with Time before p.Before (and, with p.ThroughID,
// an ID at or below it), in transactions of at
// most p.Batch rows so that claims wait for no more than one short batch. It
// keeps every receipt of a key that still has a record (the evidence of a live
// key never goes) and every earlier DecisionPruned receipt. It appends exactly
// one receipt (PruneReceipt) in the commit of its first batch, so no receipt is
// removed without the record of who removed it and why. It returns how many
// receipts it removed; after an error, those removed before it.
type Pruner interface {
	Prune(ctx context.Context, p Prune) (int, error)
}

// Prune asks a Pruner to remove old receipts.
type Prune struct {
	// Before is the cut-off: receipts with an earlier Time go (but see Pruner).
	Before time.Time
	// Actor is who prunes, Reason why; both go into the prune's receipt.
	Actor  string
	Reason string
	// Now is the time of the prune's receipt (the caller's clock).
	Now time.Time
	// Batch is the most rows one transaction removes. Optional: zero means
	// DefaultPruneBatch. Negative is invalid.
	Batch int
	// ThroughID, when positive, bounds the prune by receipt ID: a receipt with a
	// greater ID stays whatever its Time. Give it the ID an export read through
	// (ReceiptHorizoner; `idemgate receipts export` prints it) and the prune
	// removes only what the export archived: a receipt stored after the export
	// with a Time before the cut-off (a read's receipt, appended late by the
	// gate's queue) is kept for the next export. Zero: every receipt stored when
	// the prune begins. Negative is invalid.
	ThroughID int64
}

// Through is the highest receipt ID p may remove: ThroughID, or the largest
// int64 when it is zero.
func (p Prune) Through() int64 {
	if p.ThroughID > 0 {
		return p.ThroughID
	}
	return math.MaxInt64
}

// DefaultPruneBatch is Prune.Batch's default.
const DefaultPruneBatch = 10000

// Valid reports what is wrong with p: a prune needs a cut-off before Now, a
// reason and a non-negative batch.
func (p Prune) Valid() error {
	switch {
	case p.Before.IsZero():
		return errors.New("idemgate/store: a prune needs a cut-off (Prune.Before)")
	case p.Now.IsZero() || p.Before.After(p.Now):
		return errors.New("idemgate/store: a prune's cut-off must not be after its time (Prune.Before > Prune.Now): receipts of the future are not old")
	case p.Reason == "":
		return errors.New("idemgate/store: a prune needs a reason (Prune.Reason); it goes into the prune's receipt")
	case p.Batch < 0:
		return errors.New("idemgate/store: Prune.Batch must not be negative")
	case p.ThroughID < 0:
		return errors.New("idemgate/store: Prune.ThroughID must not be negative (zero: no bound)")
	}
	return nil
}

// BatchSize is p.Batch, or DefaultPruneBatch when it is zero.
func (p Prune) BatchSize() int {
	if p.Batch == 0 {
		return DefaultPruneBatch
	}
	return p.Batch
}

// PruneSummary is what a DecisionPruned receipt's Call holds.
type PruneSummary struct {
	// Before is the cut-off.
	Before time.Time `json:"before"`
	// Count is how many receipts the prune found to remove when it began (a
	// claim or a sweep running beside it may change what its later batches find).
	Count int64 `json:"count"`
	// ThroughID is the prune's bound by receipt ID (Prune.ThroughID); absent
	// when it had none.
	ThroughID int64 `json:"through_id,omitempty"`
}

// PruneReceipt is the receipt a prune of count receipts appends.
func PruneReceipt(p Prune, count int64) Receipt {
	call, _ := json.Marshal(PruneSummary{Before: p.Before.UTC(), Count: count, ThroughID: p.ThroughID})
	return Receipt{Time: p.Now, Decision: DecisionPruned, Call: call, Actor: p.Actor, Reason: p.Reason}
}

// Prunable reports whether prune p removes r; hasRecord says whether r's key
// still has a record.
func Prunable(r Receipt, p Prune, hasRecord bool) bool {
	return r.Time.Before(p.Before) && r.ID <= p.Through() && r.Decision != DecisionPruned && !hasRecord
}
