package interceptor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// Effect is what running an activity does to the outside world.
type Effect uint8

const (
	// Read changes nothing outside: it always runs and is never deduplicated.
	Read Effect = iota + 1
	// IdempotentWrite changes something, and running it again with the same key
	// converges (create with a key, update, set, upsert). When an earlier attempt's
	// outcome is unknown, it runs again with the same key.
	IdempotentWrite
	// Destructive changes something that a second run would change again (send, pay,
	// charge, delete, publish). When an earlier attempt's outcome is unknown, it is
	// refused and the withheld call is printed.
	Destructive
)

// String gives "read", "idempotent-write" or "destructive".
func (e Effect) String() string {
	switch e {
	case Read:
		return "read"
	case IdempotentWrite:
		return "idempotent-write"
	case Destructive:
		return "destructive"
	default:
		return fmt.Sprintf("Effect(%d)", uint8(e))
	}
}

// logValue is e.String() as a log value, without an allocation for the three classes.
func (e Effect) logValue() any {
	switch e {
	case Read:
		return "read"
	case IdempotentWrite:
		return "idempotent-write"
	case Destructive:
		return "destructive"
	}
	return e.String()
}

// ParseEffect is the inverse of Effect.String.
func ParseEffect(s string) (Effect, error) {
	switch s {
	case "read":
		return Read, nil
	case "idempotent-write":
		return IdempotentWrite, nil
	case "destructive":
		return Destructive, nil
	}
	return 0, fmt.Errorf("idemgate: unknown effect %q: use read, idempotent-write or destructive", s)
}

func (e Effect) valid() bool { return e >= Read && e <= Destructive }

// Classification is what Classify found for one activity name.
type Classification struct {
	Effect Effect
	// Review is true when no known verb matched: the name is classified Destructive
	// and a person should confirm it (or set Options.Effects).
	Review bool
	// Verb is the verb that decided the effect ("" when none matched, or when an
	// override decided).
	Verb string
	// Override is true when Options.Effects decided.
	Override bool
	// Source is the rule that decided (see the Source constants); Reason says it in words.
	Source Source
	// Word is the word the decision rests on, lower case: the verb, or for a flagged
	// name the word the rule is about ("search" in FederalCriminalSearch). "" when no
	// word matched or an override decided.
	Word string
	// Other is the second word the rule names, if any: "set" in GetSet, "in" in
	// CheckIn, "charge" in CreateStripeCharge, the first word in FederalCriminalSearch.
	Other string
	// Parts is the number of parts of a compound name ("GetAndRotateKeys": 2); 1 for
	// a simple name, 0 for an override.
	Parts int
	// Hinted is the effect the activity's Hints claim (0 when it has none); HintFrom
	// says who claims it (Hints.From).
	Hinted   Effect
	HintFrom string
	// Contradicts is true when the hints claim a lower effect than the name allows
	// (below a verb-list match, or below a flagged name's most severe verb): the
	// name's class stands (a flagged name is lowered only as far as its verbs allow),
	// and a person should look.
	Contradicts bool
	also        why // a flagged part other than the deciding one
	// floor is the lowest class hints may bring this name to when it is flagged: the
	// most severe word in it that is a verb wherever it stands (floorWord).
	floor     Effect
	floorWord string
}

// Word lists. A token is matched whole and case-insensitively: plurals and
// "-ing" forms are nouns ("Payments", "OrderProcessing").
type role uint8

const (
	rNone     role = iota
	rVerb          // a verb ("get", "delete", "rotate")
	rNounVerb      // a noun or a verb: a verb only in the verb position ("order", "email")
	rEither        // a verb that reads or writes depending on its object ("verify", "test")
	rConj          // splits a compound name: and, then, or, plus
	rWith          // splits only when a verb follows ("GetUserWithRoles" stays one part)
	rParticle      // makes a phrasal verb of a read verb ("CheckIn")
	rAux           // skipped in the verb position ("DoPoll" polls)
	rNext          // "next" after get/fetch/read/poll/pull: a dequeue
)

type word struct {
	w      string
	effect Effect // as a verb; 0 for non-verbs
	role   role
	money  bool // as an object, the verb moves money ("CreateCharge")
	take   bool // retrieval verb that dequeues when followed by "next"
	makes  bool // creating verb: with a money object it moves money
	vague  bool // says nothing of the effect ("process"): destructive, flagged
	object bool // whether it acts depends on its object ("InvokeModel", "MonitorInstances"): flagged
	task   bool // as the object of a retrieval verb, work taken off a queue ("GetActivityTask")
	queue  bool // as the object of poll/pull, a queue polled for work ("PollActivityTaskQueue")
}

var words = func() map[string]*word {
	m := map[string]*word{}
	add := func(e Effect, r role, list string) {
		for _, w := range strings.Fields(list) {
			m[w] = &word{w: w, effect: e, role: r}
		}
	}
	entry := func(w string) *word {
		if m[w] == nil {
			m[w] = &word{w: w}
		}
		return m[w]
	}
	add(Read, rVerb, `get list search find fetch read query lookup look describe show count check validate
		view poll browse retrieve scan inspect preview estimate calculate compute summarize summarise
		classify extract transform parse render explain plan analyze analyse compare diff download lint
		is has exists translate rank score match recommend suggest trace detect measure evaluate
		audit peek pull`)
	add(IdempotentWrite, rVerb, `create update set upsert put patch replace save write register upload
		assign unassign enable disable configure sync ensure mark rename move copy attach link unlink
		archive unarchive add insert import init initialize prepare activate deactivate subscribe
		unsubscribe grant pause resume close open reopen lock unlock extend install uninstall backup
		restore follow unfollow`)
	add(Destructive, rVerb, `delete remove destroy drop purge truncate erase wipe send notify publish
		broadcast dial pay withdraw disburse deploy rollback restart reboot
		shutdown terminate kill stop cancel revoke approve reject merge commit execute exec invoke
		submit buy sell reserve void escalate provision dispatch respond tweet invite remind suspend ban
		rotate apply complete recover start confirm authorize accept decline renew enqueue
		dequeue pop consume claim acquire emit increment decrement migrate clean cleanup place
		unpublish expire`)
	// Nouns that are verbs too: they decide only where the verb stands.
	add(IdempotentWrite, rNounVerb, `store tag label`)
	add(Destructive, rNounVerb, `order email mail charge post message text sms call page bill invoice
		transfer ship book process schedule trade share comment reply alert release sign trigger fire
		reset signal credit debit issue report record log push contact return stream handle refund
		deposit payout capture monitor format`)
	add(Destructive, rEither, `verify test ping watch load convert say generate receive wait await`)
	add(0, rConj, "and then or plus")
	add(0, rWith, "with")
	add(0, rParticle, "in out up down off on over back away")
	add(0, rAux, "do try activity")
	add(0, rNext, "next")
	for _, w := range strings.Fields("charge transfer refund payout deposit withdrawal payment disbursement") {
		entry(w).money = true
	}
	for _, w := range strings.Fields("get fetch read poll pull peek") {
		entry(w).take = true
	}
	for _, w := range strings.Fields("process handle") {
		entry(w).vague = true
	}
	// Verbs whose object decides whether anything outside changes: InvokeModel asks a
	// model, InvokeLambda runs code; MonitorInstances turns monitoring on; FormatDisk
	// erases a disk; StreamCompletion streams a model's answer, StreamEvents publishes.
	for _, w := range strings.Fields("invoke call stream execute exec monitor format") {
		entry(w).object = true
	}
	for _, w := range strings.Fields("task tasks job jobs work lease leases") {
		entry(w).task = true
	}
	for _, w := range strings.Fields("queue queues") {
		entry(w).queue = true
	}
	for _, w := range strings.Fields("create add insert put upsert save open init initialize register") {
		entry(w).makes = true
	}
	return m
}()

// token is one word of a name: text is the name's own substring, w its entry in
// words (zero when unknown).
type token struct {
	text    string
	w       *word // never nil: noWord when unknown
	seg     int   // dotted or slashed segment
	acronym bool  // all capitals in a name that has lower case ("HTTP" in HTTPGetURL)
}

var noWord word

func (t token) verb() bool { return t.w.effect != 0 }

// tokens splits name at CamelCase boundaries (keeping acronyms together:
// "HTTPGetURL" is http, get, url), underscores, hyphens and spaces; dots, slashes and
// colons also start a new segment.
func tokens(name string, out []token) []token {
	hasLower := strings.IndexFunc(name, func(r rune) bool { return 'a' <= r && r <= 'z' }) >= 0
	seg := 0
	emit := func(tok string) {
		var lower [32]byte
		t := token{text: tok, seg: seg, w: &noWord}
		if len(tok) <= len(lower) {
			n := copy(lower[:], tok)
			upper := n > 1
			for i := range n {
				if c := lower[i]; isUpper(c) {
					lower[i] = c + 'a' - 'A'
				} else if isLower(c) {
					upper = false
				}
			}
			if w := words[string(lower[:n])]; w != nil {
				t.w = w
			}
			t.acronym = upper && hasLower
		}
		out = append(out, t)
	}
	start := -1
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(isLower(c) || isUpper(c) || isDigit(c)) {
			if start >= 0 {
				emit(name[start:i])
				start = -1
			}
			if c == '.' || c == '/' || c == ':' {
				seg++
			}
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := name[i-1]
		// aB -> a|B; 1B -> 1|B; ABc -> A|Bc (end of an acronym).
		if isUpper(c) && (isLower(prev) || isDigit(prev) ||
			isUpper(prev) && i+1 < len(name) && isLower(name[i+1])) {
			emit(name[start:i])
			start = i
		}
	}
	if start >= 0 {
		emit(name[start:])
	}
	return out
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// why is one rule's finding.
type why struct {
	src         Source
	word, other string
	set         bool
}

// verdict is one part's classification.
type verdict struct {
	effect Effect
	review bool
	verb   string // the verb whose own effect was taken
	why
	floor     Effect // see Classification.floor; set here only by rules that fix it
	floorWord string
}

// Classify classifies an activity by its name, by grammar rather than by words:
//
//   - The name is split into tokens (CamelCase with acronyms kept together,
//     snake_case, kebab-case) and, when dotted or slashed, into segments: the last
//     segment names the operation ("crm.contacts.create"), the others its context.
//   - A compound name is split at and / then / or / plus (and at "with" when a verb
//     follows); each part is classified and the most severe wins. A part with no
//     known verb makes the whole destructive and flagged.
//   - In each part the verb stands first (after leading acronyms and "Do"). Words
//     that are both noun and verb (order, email, charge, post, bill, book, process,
//     schedule …) decide only there: "GetOrder" reads, "OrderApple" orders.
//   - A name is read only when nothing in it can write: a write verb anywhere
//     raises it (flagged when it follows the verb), a read verb with a particle
//     ("CheckIn") or "next" ("FetchNextJob") is not a read, and verbs that read or
//     write depending on their object (verify, test, ping, watch, load, convert,
//     generate, say, receive, wait) are destructive and flagged.
//
// Whatever cannot be told from the name is destructive or flagged for Review —
// never read. Classification.Reason says which word decided and why.
func Classify(activityName string) Classification {
	var buf [24]token
	toks := tokens(activityName, buf[:0])
	var op, context []token
	for n := len(toks); n > 0 && version(toks[n-1].text) && toks[n-1].seg > 0; n-- {
		toks = toks[:n-1] // "crm.contacts.delete.v2": the version names no operation
	}
	if n := len(toks); n > 0 {
		last := toks[n-1].seg
		i := n
		for i > 0 && toks[i-1].seg == last {
			i--
		}
		op, context = toks[i:], toks[:i]
	}
	var best, flagged verdict
	parts := 0
	var floor Effect
	var floorWord string
	for len(op) > 0 || parts == 0 {
		end := 0
		for end < len(op) && !splits(op, end) {
			end++
		}
		part := op[:end]
		if end < len(op) {
			op = op[end+1:]
		} else {
			op = nil
		}
		if len(part) == 0 && (parts > 0 || len(op) > 0) {
			continue
		}
		parts++
		v := classifyPart(part, context)
		if v.floor == 0 {
			v.floor, v.floorWord = floorOf(part, context)
		} else {
			v.floorWord = v.word
		}
		if v.floor > floor {
			floor, floorWord = v.floor, v.floorWord
		}
		if v.effect > best.effect || v.effect == best.effect && v.review && !best.review {
			best = v
		}
		if v.review && !flagged.review {
			flagged = v
		}
	}
	c := Classification{Effect: best.effect, Review: best.review || flagged.review, Verb: best.verb,
		Source: best.src, Word: best.word, Other: best.other, Parts: parts, floor: floor, floorWord: floorWord}
	if flagged.review && !best.review {
		c.also = flagged.why
		c.also.set = true
	}
	return c
}

// version reports whether s reads like "v2", "V10" or "3".
func version(s string) bool {
	if s != "" && (s[0] == 'v' || s[0] == 'V') {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// splits reports whether op[i] ends a part of a compound name.
func splits(op []token, i int) bool {
	switch op[i].w.role {
	case rConj:
		return true
	case rWith:
		return i+1 < len(op) && (op[i+1].w.role == rVerb || op[i+1].w.role == rEither)
	}
	return false
}

// classifyPart classifies one part of a name; context is the dotted segments
// before the operation.
func classifyPart(part, context []token) verdict {
	i := 0
	// Leading acronyms qualify the verb ("HTTPGetURL", "SMSSendOTP") unless they are
	// the verb ("SMSUser").
	for i < len(part) && (part[i].w.role == rAux ||
		part[i].acronym && i+1 < len(part) && (!part[i].verb() || part[i+1].verb())) {
		i++
	}
	if i == len(part) {
		return verdict{effect: Destructive, review: true, why: why{src: SourceNone, other: text(part)}}
	}
	first := part[i]
	if !first.verb() {
		// No verb where the verb stands: a verb later (any kind) cannot be trusted.
		later := token{w: &noWord}
		for _, t := range part[i+1:] {
			if t.verb() && t.w.effect > later.w.effect {
				later = t
			}
		}
		if later.verb() {
			return verdict{effect: Destructive, review: true, why: why{src: SourceVerbLater, word: later.w.w, other: first.text}}
		}
		return verdict{effect: Destructive, review: true, why: why{src: SourceNone, other: text(part)}}
	}
	v := verdict{effect: first.w.effect, verb: first.w.w, why: why{src: SourceVerb, word: first.w.w}}
	rest := part[i+1:]
	if first.w.role == rEither || first.w.vague || first.w.object {
		v.review, v.src = true, SourceReadOrWrite
	}
	if len(rest) > 0 && v.effect == Read {
		next, last := rest[0], rest[len(rest)-1]
		switch {
		case next.w.role == rParticle && !(first.w.w == "look" && next.w.w == "up"):
			return verdict{effect: Destructive, review: true, floor: Destructive, why: why{src: SourcePhrasal, word: first.w.w, other: next.w.w}}
		case next.w.role == rNext && first.w.take:
			return verdict{effect: Destructive, review: true, floor: Destructive, why: why{src: SourceDequeue, word: first.w.w, other: next.w.w}}
		case first.w.take && (last.w.task || last.w.queue && (first.w.w == "poll" || first.w.w == "pull")):
			// "GetActivityTask", "PollForDecisionTask", "PollActivityTaskQueue": the
			// retrieval claims the work it returns.
			return verdict{effect: Destructive, review: true, floor: Destructive, why: why{src: SourceDequeue, word: first.w.w, other: last.w.w}}
		}
	}
	// Verbs in a row ("ExtractTransformLoad") are all verbs; past the run only
	// plain write verbs count — a noun-or-verb there is a noun ("GetBasketOrder").
	run := true
	for _, t := range rest {
		run = run && (t.w.role == rVerb || t.w.role == rEither)
		counts := run || t.w.role == rVerb
		if !counts || t.w.effect <= v.effect {
			continue
		}
		v = verdict{effect: t.w.effect, review: true, verb: t.w.w, why: why{src: SourceSecondVerb, word: t.w.w, other: first.w.w}}
		if t.w.role == rEither {
			v.src, v.other = SourceReadOrWrite, ""
		}
	}
	for _, t := range context {
		if t.w.role == rVerb && t.w.effect > v.effect {
			v = verdict{effect: t.w.effect, review: true, verb: t.w.w, why: why{src: SourceSecondVerb, word: t.w.w, other: first.w.w}}
		}
	}
	// A noun-or-verb first and a verb of another effect last: "CreditCheck" may be
	// a check, "OrderCreate" a create.
	if first.w.role == rNounVerb && len(rest) > 0 {
		if last := rest[len(rest)-1]; last.verb() && last.w.effect != first.w.effect && v.src == SourceVerb {
			v.review, v.src, v.other = true, SourceNounVerbFirst, last.w.w
			if last.w.effect > v.effect {
				v.effect, v.verb = last.w.effect, last.w.w
			}
		}
	}
	if v.effect == IdempotentWrite && first.w.makes {
		for _, ts := range [2][]token{rest, context} {
			for _, t := range ts {
				if m, ok := money(t); ok {
					v.effect, v.src, v.word, v.other = Destructive, SourceMoney, first.w.w, m
					v.verb = first.w.w
				}
			}
		}
	}
	return v
}

// floorOf is the most severe word of a part that is a verb wherever it stands
// (and the word): a verb of the verb lists, or a word that is both noun and verb
// standing where a verb may stand — first, or last in a resource-first name — with
// no other verb in the part ("process" in ProcessPayment, "capture" in
// charges_capture, not "issue" in issue_read). A creating verb whose object moves
// money counts as destructive. Hints may lower a flagged name to it, never below.
func floorOf(part, context []token) (Effect, string) {
	var f Effect
	var w string
	verbs := false
	for _, t := range part {
		if t.w.role == rVerb || t.w.role == rEither {
			verbs = true
			if t.w.effect > f {
				f, w = t.w.effect, t.w.w
			}
		}
	}
	for _, t := range context {
		if t.w.role == rVerb && t.w.effect > f {
			f, w = t.w.effect, t.w.w
		}
	}
	i := 0
	for i < len(part) && (part[i].w.role == rAux ||
		part[i].acronym && i+1 < len(part) && (!part[i].verb() || part[i+1].verb())) {
		i++
	}
	if i < len(part) && part[i].w.role == rNounVerb && !verbs && part[i].w.effect > f {
		f, w = part[i].w.effect, part[i].w.w
	}
	// The verb of a resource-first name stands last (charges_capture, cards_charge):
	// there too a noun-and-verb word with no other verb in the part is the verb.
	j := len(part) - 1
	for j > i && part[j].w.role == rAux {
		j--
	}
	if j > i && part[j].w.role == rNounVerb && !verbs && part[j].w.effect > f {
		f, w = part[j].w.effect, part[j].w.w
	}
	if f == IdempotentWrite {
		for _, t := range part {
			if !t.w.makes {
				continue
			}
			for _, ts := range [2][]token{part, context} {
				for _, o := range ts {
					if m, ok := money(o); ok {
						return Destructive, m
					}
				}
			}
		}
	}
	return f, w
}

// money reports whether t names money moving, also in the plural ("payouts").
func money(t token) (string, bool) {
	if t.w.money {
		return t.w.w, true
	}
	if n := len(t.text); n > 1 && (t.text[n-1] == 's' || t.text[n-1] == 'S') {
		var lower [32]byte
		if n-1 <= len(lower) {
			k := copy(lower[:], t.text[:n-1])
			for j := range k {
				if isUpper(lower[j]) {
					lower[j] += 'a' - 'A'
				}
			}
			if w := words[string(lower[:k])]; w != nil && w.money {
				return w.w, true
			}
		}
	}
	return "", false
}

// text joins a part's tokens for a reason ("the thing").
func text(part []token) string {
	if len(part) == 0 {
		return ""
	}
	s := part[0].text
	for _, t := range part[1:] {
		s += " " + t.text
	}
	return s
}

// Source names the rule that decided a Classification.
type Source uint8

const (
	// SourceNone: no known verb in the name (or in one part of a compound name):
	// destructive, flagged for review.
	SourceNone Source = iota
	// SourceVerb: the word in the verb position decided.
	SourceVerb
	// SourceOverride: Options.Effects decided.
	SourceOverride
	// SourceVerbLater: the verb position holds no verb, but a verb stands later
	// ("FederalCriminalSearch"): position cannot tell, destructive, flagged.
	SourceVerbLater
	// SourceSecondVerb: a write verb follows the verb ("GetSet", "GetUserDelete"):
	// the more severe counts, flagged.
	SourceSecondVerb
	// SourcePhrasal: a read verb takes a particle ("CheckIn", "CheckOut"): a
	// phrasal verb is not the read, destructive, flagged.
	SourcePhrasal
	// SourceDequeue: "get/fetch/read/poll/pull next" takes work off a queue:
	// destructive, flagged.
	SourceDequeue
	// SourceReadOrWrite: a verb that reads or writes depending on its object
	// ("VerifyEmail" sends a code, "TestWebhook" fires one): destructive, flagged.
	SourceReadOrWrite
	// SourceNounVerbFirst: the first word is both noun and verb and a verb with
	// another effect ends the name ("CreditCheck", "OrderCreate"): the more severe
	// counts, flagged.
	SourceNounVerbFirst
	// SourceMoney: a creating verb whose object moves money ("CreateStripeCharge",
	// "stripe.payouts.create"): destructive.
	SourceMoney
	// SourceHint: the activity's Hints decided — they raised the name's class, or the
	// name has no known verb and took its class from them.
	SourceHint
	// SourceHintLowered: the name is flagged (its grammar cannot tell, as in
	// "actions_get" or "issue_read") and its Hints claim a lower class; they lowered
	// it, but never below the most severe word in the name that is a verb wherever it
	// stands (Classification.Word): "orders_cancel" with readOnlyHint stays
	// destructive.
	SourceHintLowered
)

var sourceNames = [...]string{"none", "verb", "override", "verb-later", "second-verb", "phrasal", "dequeue",
	"read-or-write", "noun-verb-first", "money", "hint", "hint-lowered"}

// String gives the rule's short name ("verb", "phrasal", …).
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// EffectSource is what a receipt records as the decider of the class
// (store.Receipt.EffectSource): store.EffectByOverride for SourceOverride,
// store.EffectByHint for SourceHint, store.EffectByName for every rule that reads
// the name.
func (s Source) EffectSource() string {
	switch s {
	case SourceOverride:
		return store.EffectByOverride
	case SourceHint, SourceHintLowered:
		return store.EffectByHint
	}
	return store.EffectByName
}

// Reason says in one line why the name got its effect and, when flagged, what a
// person should check: "'get' is the verb: read", "'check in' is a phrasal verb,
// not the read 'check': destructive until reviewed".
func (c Classification) Reason() string {
	s := c.reason(c.Source, c.Word, c.Other)
	if c.Parts > 1 {
		s = fmt.Sprintf("compound name (%d parts, the most severe counts): %s", c.Parts, s)
	}
	if c.also.set {
		s += "; also " + c.reason(c.also.src, c.also.word, c.also.other)
	}
	return s
}

func (c Classification) reason(src Source, word, other string) string {
	word, other = strings.ToLower(word), strings.ToLower(other)
	switch src {
	case SourceOverride:
		return "set by Options.Effects"
	case SourceVerb:
		return fmt.Sprintf("%q is the verb: %s", word, c.Effect)
	case SourceNone:
		if other != "" {
			return fmt.Sprintf("no known verb in %q: treated as destructive; confirm with Options.Effects", other)
		}
		return "no known verb: treated as destructive; confirm with Options.Effects"
	case SourceVerbLater:
		return fmt.Sprintf("no verb where the verb stands (%q); %q comes later, so position cannot tell: "+
			"treated as destructive; confirm with Options.Effects", other, word)
	case SourceSecondVerb:
		return fmt.Sprintf("%q stands beside the verb %q: two verbs, the more severe counts (%s); if %q is a noun here, "+
			"confirm with Options.Effects", word, other, c.Effect, word)
	case SourcePhrasal:
		return fmt.Sprintf("%q %q is a phrasal verb, not the read %q: treated as destructive; confirm with Options.Effects",
			word, other, word)
	case SourceDequeue:
		return fmt.Sprintf("%q %q takes work off a queue: treated as destructive; confirm with Options.Effects", word, other)
	case SourceReadOrWrite:
		return fmt.Sprintf("%q reads or writes depending on what it acts on: treated as destructive; confirm with "+
			"Options.Effects", word)
	case SourceNounVerbFirst:
		return fmt.Sprintf("%q stands first and is a verb there, but %q ends the name: position cannot tell, the more "+
			"severe counts (%s); confirm with Options.Effects", word, other, c.Effect)
	case SourceMoney:
		return fmt.Sprintf("%q with the object %q moves money: destructive", word, other)
	case SourceHint:
		if word != "" {
			return fmt.Sprintf("%q reads as a lower class, the hints of %s say %s: the more severe counts", word,
				c.hintFrom(), c.Effect)
		}
		return fmt.Sprintf("no known verb in the name; the hints of %s say %s", c.hintFrom(), c.Effect)
	case SourceHintLowered:
		if word == "" {
			return fmt.Sprintf("the name cannot tell and has no verb that stands as one; the hints of %s say %s",
				c.hintFrom(), c.Effect)
		}
		if c.Hinted < c.Effect {
			return fmt.Sprintf("the name cannot tell; the hints of %s say %s, but %q in the name allows no lower than %s",
				c.hintFrom(), c.Hinted, word, c.Effect)
		}
		return fmt.Sprintf("the name cannot tell; the hints of %s say %s, which %q, the most severe verb in the name, allows",
			c.hintFrom(), c.Effect, word)
	}
	return src.String()
}

func (c Classification) hintFrom() string {
	if c.HintFrom == "" {
		return "an untrusted source"
	}
	return c.HintFrom
}

// Hints is an untrusted claim about what an activity does: an MCP tool's
// annotations, a vendor's API description. Hints may raise the class the name reads
// as and give a class to a name with no known verb (see Options.Hints). They never
// lower a verb-list match; a flagged name (its grammar cannot tell: "actions_get",
// "issue_read") they may lower only down to the most severe word in it that is a
// verb wherever it stands ("get", "read"; "cancel" in "orders_cancel"). nil fields
// say nothing.
type Hints struct {
	// ReadOnly: the activity changes nothing (MCP readOnlyHint).
	ReadOnly *bool
	// Destructive: a second run changes something again (MCP destructiveHint).
	Destructive *bool
	// Idempotent: running it again with the same arguments changes nothing more
	// (MCP idempotentHint).
	Idempotent *bool
	// From names who claims it, shown in reasons and the census ("mcp server crm").
	From string
}

// Effect is the class the hints claim, 0 when they say nothing: Destructive when
// Destructive is true; else Read when ReadOnly is true; else IdempotentWrite when
// Idempotent is true; else, when they say anything (a write that is neither read-only
// nor idempotent), Destructive.
func (h Hints) Effect() Effect {
	switch {
	case h.Destructive != nil && *h.Destructive:
		return Destructive
	case h.ReadOnly != nil && *h.ReadOnly:
		return Read
	case h.Idempotent != nil && *h.Idempotent:
		return IdempotentWrite
	case h.ReadOnly != nil || h.Destructive != nil || h.Idempotent != nil:
		return Destructive
	}
	return 0
}

// Classify classifies name with the options applied: an entry in Options.Effects
// wins over everything, both ways; otherwise the name's class, tightened or refined
// by Options.Hints (see there).
func (o Options) Classify(activityName string) Classification {
	if e, ok := o.Effects[activityName]; ok {
		return Classification{Effect: e, Override: true, Source: SourceOverride}
	}
	c := Classify(activityName)
	h, ok := o.Hints[activityName]
	if !ok {
		return c
	}
	return c.hinted(h)
}

// hinted applies untrusted hints to a name's classification: they tighten; they
// lower only a flagged name, and only down to its floor.
func (c Classification) hinted(h Hints) Classification {
	he := h.Effect()
	if he == 0 {
		return c
	}
	c.Hinted, c.HintFrom = he, h.From
	switch {
	case c.Source == SourceNone && c.Parts == 1:
		// No known verb anywhere in the name: the hints give the class.
		c.Effect, c.Review, c.Source, c.Verb, c.Word, c.Other = he, false, SourceHint, "", "", ""
	case he > c.Effect:
		c.Effect, c.Source = he, SourceHint
	case he < c.Effect && c.Review && max(he, c.floor) < c.Effect:
		// The grammar could not tell ("actions_get": position; "issue_read": noun or
		// verb); the hints pick the lower reading, as far as the name's verbs allow.
		c.Effect, c.Source, c.Verb, c.Word, c.Other, c.also = max(he, c.floor), SourceHintLowered, c.floorWord,
			c.floorWord, "", why{}
		if he < c.floor {
			c.Contradicts = true // the hints claim less than the name's verbs allow: a person should look
		} else {
			c.Review = false
		}
	case he < c.Effect:
		c.Contradicts = true
	}
	return c
}

// CensusReport counts activities by effect and names those flagged for review.
type CensusReport struct {
	Read, IdempotentWrite, Destructive int
	// Review lists, sorted, the names flagged for review (no known verb, or a name
	// whose grammar cannot tell: see each Classification's Reason).
	Review []string
	// Contradicts lists, sorted, the names whose Hints claim a lower class than the
	// name reads as (the name's class stands).
	Contradicts []string
	// Effects maps every name to its classification.
	Effects map[string]Classification
}

// String reads "effects: read=N idempotent-write=N destructive=N", followed by
// "; review: A, B" when any name was flagged.
func (c CensusReport) String() string {
	s := fmt.Sprintf("effects: read=%d idempotent-write=%d destructive=%d", c.Read, c.IdempotentWrite, c.Destructive)
	if len(c.Review) > 0 {
		s += "; review: " + strings.Join(c.Review, ", ") +
			" (the name cannot tell: treated as destructive or the more severe; confirm with Options.Effects)"
	}
	if len(c.Contradicts) > 0 {
		s += "; hints contradict the name: " + strings.Join(c.Contradicts, ", ") + " (the name's class stands)"
	}
	return s
}

// Lines gives one line per name, sorted: "NAME: EFFECT — REASON" (the reason names
// the deciding word), with "review: " in front of the flagged ones, and the hints'
// claim after the reason when there is one.
func (c CensusReport) Lines() []string {
	names := make([]string, 0, len(c.Effects))
	for n := range c.Effects {
		names = append(names, n)
	}
	slices.Sort(names)
	lines := make([]string, len(names))
	for i, n := range names {
		cl := c.Effects[n]
		flag := ""
		if cl.Review {
			flag = "review: "
		}
		lines[i] = fmt.Sprintf("%s%s: %s — %s%s", flag, n, cl.Effect, cl.Reason(), cl.hintNote())
	}
	return lines
}

// hintNote says what the hints claimed, beside the name's class.
func (c Classification) hintNote() string {
	switch {
	case c.Hinted == 0:
		return ""
	case c.Contradicts && c.Source == SourceHintLowered:
		return fmt.Sprintf(" [hints of %s say %s: lower than the name's verbs allow, lowered only to %s]", c.hintFrom(),
			c.Hinted, c.Effect)
	case c.Contradicts:
		return fmt.Sprintf(" [hints of %s say %s: contradict the name, ignored (a verb-list match is never lowered)]",
			c.hintFrom(), c.Hinted)
	}
	return fmt.Sprintf(" [hints of %s say %s]", c.hintFrom(), c.Hinted)
}

// Census classifies activity names with Classify (no overrides).
func Census(activityNames []string) CensusReport {
	return Options{}.Census(activityNames)
}

// Census classifies activity names with the options' overrides applied.
func (o Options) Census(activityNames []string) CensusReport {
	r := CensusReport{Effects: make(map[string]Classification, len(activityNames))}
	for _, name := range activityNames {
		if _, dup := r.Effects[name]; dup {
			continue
		}
		c := o.Classify(name)
		r.Effects[name] = c
		switch c.Effect {
		case Read:
			r.Read++
		case IdempotentWrite:
			r.IdempotentWrite++
		default:
			r.Destructive++
		}
		if c.Review {
			r.Review = append(r.Review, name)
		}
		if c.Contradicts {
			r.Contradicts = append(r.Contradicts, name)
		}
	}
	slices.Sort(r.Review)
	slices.Sort(r.Contradicts)
	return r
}
