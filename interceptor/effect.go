package interceptor

import (
	"fmt"
	"slices"
	"strings"
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
}

// Verb lists. A token is matched whole, case-insensitively; the most severe match wins.
type verb struct {
	word   string
	effect Effect
}

var verbs = func() map[string]verb {
	m := map[string]verb{}
	add := func(e Effect, words string) {
		for _, w := range strings.Fields(words) {
			m[w] = verb{w, e}
		}
	}
	add(Read, `get list search find fetch read query lookup describe show count check validate
		verify view watch poll browse retrieve scan inspect preview estimate calculate compute
		summarize summarise classify extract parse render explain plan analyze analyse compare diff
		download load lint test ping is has exists translate format convert rank score
		match recommend suggest`)
	add(IdempotentWrite, `create update set upsert put patch replace save store write register
		upload assign tag label enable disable configure sync ensure mark rename move copy attach
		link unlink archive unarchive add insert import`)
	add(Destructive, `delete remove destroy drop purge truncate erase wipe send email mail notify
		post publish broadcast message text sms call dial page pay charge refund capture transfer
		withdraw payout disburse bill invoice deploy rollback restart reboot shutdown terminate kill
		stop cancel revoke approve reject merge push commit execute exec invoke trigger fire submit
		order buy sell trade book reserve sign void release escalate alert provision reset ship
		dispatch reply respond comment tweet share invite remind suspend ban`)
	return m
}()

// Classify classifies an activity by its name. The name is split into tokens at
// CamelCase boundaries (keeping acronyms together: "HTTPGetURL" is http, get, url),
// underscores, hyphens, dots, slashes and spaces; each token is looked up in the verb
// lists; the most severe match wins. A name with no known verb is Destructive and
// flagged for Review — never Read.
func Classify(activityName string) Classification {
	best := Classification{}
	var lower [64]byte
	eachToken(activityName, func(tok string) {
		if len(tok) > len(lower) {
			return
		}
		n := copy(lower[:], tok)
		for i := range n {
			if c := lower[i]; 'A' <= c && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		if v, ok := verbs[string(lower[:n])]; ok && v.effect > best.Effect {
			best = Classification{Effect: v.effect, Verb: v.word}
		}
	})
	if best.Effect == 0 {
		return Classification{Effect: Destructive, Review: true}
	}
	return best
}

// eachToken calls fn with each token of name, without allocating.
func eachToken(name string, fn func(string)) {
	start := -1
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := isLower(c) || isUpper(c) || isDigit(c)
		if !alnum {
			if start >= 0 {
				fn(name[start:i])
				start = -1
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
			fn(name[start:i])
			start = i
		}
	}
	if start >= 0 {
		fn(name[start:])
	}
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Classify classifies name with the options' overrides applied: an entry in
// Options.Effects wins over the verb lists, both ways.
func (o Options) Classify(activityName string) Classification {
	if e, ok := o.Effects[activityName]; ok {
		return Classification{Effect: e, Override: true}
	}
	return Classify(activityName)
}

// CensusReport counts activities by effect and names those flagged for review.
type CensusReport struct {
	Read, IdempotentWrite, Destructive int
	// Review lists, sorted, the names no known verb matched (counted as Destructive).
	Review []string
	// Effects maps every name to its classification.
	Effects map[string]Classification
}

// String reads "effects: read=N idempotent-write=N destructive=N", followed by
// "; review: A, B" when any name was flagged.
func (c CensusReport) String() string {
	s := fmt.Sprintf("effects: read=%d idempotent-write=%d destructive=%d", c.Read, c.IdempotentWrite, c.Destructive)
	if len(c.Review) > 0 {
		s += "; review: " + strings.Join(c.Review, ", ") +
			" (no known verb: treated as destructive; confirm with Options.Effects)"
	}
	return s
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
	}
	slices.Sort(r.Review)
	return r
}
