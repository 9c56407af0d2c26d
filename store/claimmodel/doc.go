// Package claimmodel explores the claim rules of package store exhaustively: one
// key, two or three attempts of it, a vendor, a person with the resolve command, a
// reconciler that asks a witness, and time passing, with every interleaving of
// their events up to a bounded depth.
//
// The model calls the real rules (store.Decide, store.Apply, store.ApplyResolve,
// store.Blocking, store.Expired, store.ApplySent, store.ResendWindow, store.Exits and the gate's
// vendor-window rule, gathered in Current), not a copy, so a change of the rules is explored as it is written.
// Explore walks the state space breadth first with a visited set over a canonical
// encoding of each state and checks, after every step:
//
//   - a destructive write reaches the vendor at most once, unless a person said
//     not-sent (with a vendor that deduplicates on the key: at most one effect, a
//     re-send inside the vendor's window being no effect);
//   - a stored result is only returned to a call with the same key and arguments hash;
//   - no write is reported done (StateCompleted) that never reached the vendor;
//   - a claim whose owner is running inside its lease is never taken over,
//     re-claimed, expired, swept or resolved (by a person or a witness);
//   - "an earlier attempt may have sent" never becomes false without a person or a
//     witness's "not sent", and the key's first-claimed time never moves while it
//     holds;
//   - a witness's settlement never stores "not sent" for a write the vendor
//     performed: neither one performed before the answer arrived, nor one an
//     attempt running at the settlement performs after it;
//   - a finished destructive write's record is not forgotten (expired, swept or
//     claimed afresh) while its workflow can still be reset — open, or closed within
//     the retention (Config.Retention; a sweep that asks Temporal learns which).
//
// A write whose re-send relies on the vendor sends either through the keyed
// transport, which records its evidence in the claim first, or (configuration
// "destructive-vendor-unkeyed") without the key: the gate must then refuse. In
// "destructive-two-vendors" (Config.SecondWindow, atk-wit finding 1) it goes to two
// vendors with different windows, through a keyed transport each, in either order;
// an attempt may die between its writes, and a write may be lost on its way after
// its evidence was recorded. Its witness is the first vendor's lookup, which
// answers only for a key whose evidence (every claim's, store.Exits) names that
// vendor and nothing else: the model finds the second effect when a takeover
// drops the evidence of the claims before it (TestExploreFindsTheDroppedEvidence,
// TestExploreFindsTheTakeoverThatDroppedTheEvidence).
//
// Witnesses (issue 19, Config.Witness, package witness): "an unknown outcome is
// settled by the first witness that can tell ... a witness's 'not sent' counts only
// after the attempt's lease passed" (DESIGN.md). The model's reconciler — the gate
// meeting an unknown record, the plugin's background pass, `idemgate reconcile` —
// asks at any step, reading AskedAt from its own worker's clock (any of the
// configuration's skews, as witness.Asker reads the gate's clock), and the witness
// answers truthfully of that moment: "sent" when a request of the write has reached
// the vendor, else "not sent". The answer arrives at any later step, or never (a
// lost answer, a timeout: a new ask replaces it), and settles through
// store.ApplyResolve with Transition.Witness and AskedAt, its Now read from the same
// clock. A witness that cannot tell, errs or times out is asked too and settles
// nothing. An attempt may still reach the vendor for Config.Overrun past its
// deadline (a zombie that ignores its cancellation, a request written just before
// the deadline that lands after it), less than store.LeaseMargin.
//
// The vendor-window rule (Rules.Resend) takes the gate's clock bound, the model's
// largest worker skew. A key is otherwise legitimately forgotten once its window
// passed (a repeat after that is a new write by design): the checks start a new
// epoch then.
//
// Sequences turns random walks of the same model into store calls with the
// outcome and record the rules expect after each, which package storetest replays
// through every backend, so the model and the databases are held to one answer
// (the witnesses' settlements included).
package claimmodel
