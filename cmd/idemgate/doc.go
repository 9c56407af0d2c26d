// Command idemgate is the operator's side of idemgate: it reads and settles the
// claim store the workers share.
//
// When the gate refuses a destructive write because it cannot tell whether the
// first attempt reached the vendor, a person decides: look at what is pending,
// check with the vendor, and resolve the key one way or the other.
//
// # Usage
//
//	idemgate COMMAND [flags]
//
//	idemgate receipts [--key K [--namespace NS --activity NAME]] [--workflow ID] [--activity NAME]
//	                  [--since DURATION] [--decision D] [--limit N] [--after CURSOR] [--scan N] [--probes]
//	idemgate receipts export --before T [--out FILE]
//	idemgate receipts prune  --before T --through-id ID --reason WHY [--actor WHO] [--batch N]
//	idemgate pending  [--limit N] [--probes]
//	idemgate resolve  KEY --sent --result FILE|- --reason WHY [--actor WHO]
//	idemgate resolve  KEY --not-sent --reason WHY [--actor WHO]
//	idemgate pause    --activity NAME | --effect destructive|idempotent-write [--reason WHY] [--actor WHO]
//	idemgate resume   --activity NAME | --effect destructive|idempotent-write [--reason WHY] [--actor WHO]
//	idemgate pauses
//	idemgate census   [--strict] NAME...
//	idemgate console  [--listen 127.0.0.1:PORT] [--token-file FILE] [--read-only] [--temporal-ui URL] [--namespace NS]
//	idemgate sweep    [--limit N] [--temporal-address HOST:PORT --namespace NS]
//	idemgate reconcile --temporal-address HOST:PORT --namespace NS [--dry-run] [--limit N]
//	                  [--window D] [--witness-timeout D]
//
// Every command that reads the store takes --store: a SQLite file path or a
// PostgreSQL DSN (postgres://…). It defaults to $IDEMGATE_STORE, else the file the
// worker uses by default (idemgate.db in the working directory). A SQLite file that
// does not exist is an error, not a new empty store. Every command takes --json for
// scripts; otherwise it prints a table.
//
// # Commands
//
// receipts lists the append-only receipts, oldest first: time, key, activity,
// effect, workflow/run, attempt, decision, args hash, result reference, error (and
// who resolved or paused, and why). --key with --namespace and --activity takes the
// business key given to interceptor.WithKey. --since 1h shows the last hour.
// Receipts list in the order the store appended them, except a read's: the gate
// appends read receipts in batches up to 100 ms after the reads ran, so each is
// listed at its read's time (store.ReadsAtTheirTime) among the receipts of its
// page: a read older than a page's receipts but stored after them is on a later
// page. The store is read a bounded page at a time (store.ReceiptPager: at most
// --scan receipts examined per page): a filter few receipts match (--activity
// alone, which no index serves) ends after a few pages with "more may follow"
// and the cursor, which --after takes to go on. On PostgreSQL --since without
// --key, --workflow or a rare --decision lists by time (its time index).
// --key shows the key's whole story, oldest first, and ends with a summary line
// (receipts per decision, first and last time, the key's state now); with --limit N
// the newest N of it — never the oldest rows with the resolution cut off. The
// plugin's store check at every worker start (two receipts of activity
// idemgate.probe, interceptor.ProbeActivity) is left out of receipts and pending
// unless --probes (or --activity idemgate.probe) asks for it; receipts export keeps
// them, since an archive is taken before a prune removes what it holds.
//
// receipts export writes every receipt older than T (a time, a date or a duration
// ago) as JSON lines, oldest first, for an archive; --out creates the file
// owner-only and never overwrites one. It reads through the receipt ID it prints
// (store.ReceiptHorizoner: every receipt up to it is stored), and receipts prune
// --through-id ID removes only what it archived: a read's receipt stored after
// the export with a time before T stays. receipts prune removes them in batches
// (claims wait for at most one) and records the prune in one receipt (decision
// pruned: cut-off, count, who, why). Kept whatever their age: the receipts of
// keys that still have a record, and earlier prunes. The gate itself never
// changes or removes a receipt.
//
// pending lists the writes that wait on a witness or a person, oldest first, with
// the exact withheld call: a claim whose owner is gone with the outcome unknown
// (state unknown, or claimed with its lease passed — listed from that moment, no
// margin), and a destructive claim whose lease still runs but on which an attempt
// was already refused (its owner "may still be running until" the lease). A person
// may resolve an unknown key at once and a claim from its lease plus
// store.LeaseMargin (five minutes, for workers whose clocks run behind); pending
// says when (RESOLVE FROM, resolvable_from), and that the look at the vendor must
// come from then on too (one before can miss a request still on its way). In --json, may_have_sent is true when
// the write may have reached the vendor — its body began or its key may have left:
// for every pending record; earlier_attempt_may_have_sent is the record's mark that
// an attempt before the current owner's may have.
//
// resolve settles one pending key, owner-checked: it reads the record and moves it
// only if nobody touched it since. Before the claim's lease plus store.LeaseMargin it
// refuses, and says from when it accepts the key and why. --sent says the write happened: the result file
// (the activity's result as JSON, "-" for standard input, `null` for an activity
// that returns only an error) is stored the way the gate stores results, and the
// next attempt returns it without running. --not-sent says it did not: the claim is
// released and the next attempt runs the write once more. --reason is required; the
// receipt records who (--actor, default the OS user) and why.
//
// pause and resume keep a kill switch in the store: every worker refuses the paused
// writes (WriteGated, retryable) within interceptor.Options.PauseRefresh (2 s by
// default), without a restart, and says who paused, when and why. Reads are never
// paused. pauses lists the pauses in force.
//
// console serves the operator's web page (package console, docs/console.md) on the
// store until Ctrl-C: the writes waiting on a person first, with the withheld call,
// what the witnesses said and the earlier attempt's error; a key's story; a
// workflow's writes; the census; the pauses. Its settle and pause forms are the store
// calls and receipts of resolve, pause and resume (actor "console"); --read-only
// hides and refuses them. It listens on loopback (127.0.0.1:7380) unless it has a
// token, from --token-file FILE or $IDEMGATE_CONSOLE_TOKEN (never a flag value).
//
// census classifies activity names as the gate does, prints the word that decided
// and why, and flags the names whose grammar cannot tell (no known verb, a verb out of
// place, a verb that reads or writes); --strict exits 1 and lists them with their
// reasons when any name is flagged.
//
// sweep removes the records past their window once and reports how many. It keeps a
// finished destructive write whose workflow may still be reset (a reset run would send
// it again) and says how many it kept; with --temporal-address and --namespace it asks
// Temporal about each one's root workflow (the first of its parent-child chain, whose
// reset re-creates its children with the same keys) and its own workflow, and forgets
// those whose workflows Temporal no longer has — only in a namespace where Temporal
// shows a run this store recorded (in any other, every workflow looks gone: it
// forgets nothing and fails). With --limit N it forgets at most N, passing over those
// whose workflow still runs.
//
// reconcile asks Temporal's history about every pending key whose attempt's lease
// has passed (at most --limit, oldest first) and settles those it can tell: a key
// whose activity completed in its workflow's history (the store lost the
// completion, or an async activity was completed with the plain
// client.CompleteActivity) is settled as sent with the result Temporal holds — a
// resolved receipt by actor "witness:temporal" naming the history event — so the
// next attempt returns that result. A failed, timed-out or still open activity, or a
// history Temporal no longer has, cannot tell: the key stays pending for resolve.
// It prints per key what each witness said and what was settled; --dry-run settles
// nothing. Keys built from interceptor.Options.IdentifyingFields, or a tool's
// business key under Options.ToolNames, are not recognised here (the CLI does not
// know the workers' options): the plugin's own reconciler
// (interceptor.PluginOptions.ReconcileEvery) settles those. It exits 1 when a key
// could not be asked (Temporal did not answer).
//
// # Exit codes
//
// 0 success; 1 the operation failed or was refused (nothing changed); 2 bad usage.
package main
