// Package store defines the durable memory behind the idemgate gate: an atomic claim
// per key with an owner token and a lease, the stored result of a finished write, and
// append-only receipts of every decision.
//
// # Interfaces
//
// Gate is the small one: the seven methods a worker calls to gate activities
// (claim, complete, release, abandon, read a record, append a receipt, read the
// pauses). Write a backend or a test double against it first. Operator is what the
// idemgate command and reconcilers call to inspect and settle keys (receipts,
// pending keys, resolve, pause, sweep). Store embeds both; every backend here
// implements Store. Two optional interfaces serve the gate's read receipt queue:
// ReceiptBatcher (many receipts in one atomic step) and DurabilityReporter (the
// store's Durability; a store that does not say is taken as strict). Two serve the
// operator at scale: ReceiptPager (bounded pages of a listing, each examining at
// most ReceiptFilter.Scan receipts, with the cursor to go on) and ReceiptHorizoner
// (the ID up to which every receipt is stored: an export reads through it and a
// prune removes through it, Prune.ThroughID).
//
// # Contract
//
// A key is claimed by primary-key insert: of many concurrent Begins on one key,
// exactly one wins. Complete, Release and Abandon are owner-checked (a fencing token
// per attempt), so a zombie attempt that finishes late cannot overwrite the attempt
// that took over. Each state change appends its receipt in the same atomic step.
// Decide and Apply are the rules every backend applies, so every backend agrees;
// package storetest checks a backend against them.
//
// Two rules hold whatever the timing. A claim whose lease (plus LeaseMargin) has not
// passed is never expired, swept or claimed again (Expired), however short the
// window. And "an earlier attempt may have reached the vendor" (Record.MayHaveSent)
// only grows: a later attempt's definite failure leaves the key unknown
// (ReleasedState) and its first-claimed time stays; only a person's Resolve to
// released clears it. So does the evidence that the key left through a keyed
// transport (Record.Sent): a takeover keeps every earlier claim's, each tagged
// with its claim, so a re-send and a witness see every exit since the first claim
// (Exits, ResendWindow).
//
// Two kinds of destructive record outlive their window. One whose outcome nobody
// knows stays until a person resolves it (UnknownOutcome). A finished one of a
// workflow stays while that workflow can still be reset, since a reset run sends the
// same key again (ResetHeld): the claims of its own workflow ID, and of any workflow
// of the same root (Record.RootWorkflowID, Root: a reset of the root re-creates its
// children, under new IDs when the SDK generates them), get the stored result, and
// only a sweep that heard from Temporal that none of ResetBy can be reset forgets it
// (Forgettable, HeldSweeper).
//
// Backends: store/memory (tests), store/sqlite (embedded default) and
// store/postgres (many workers on many machines).
package store
