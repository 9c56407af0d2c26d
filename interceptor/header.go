package interceptor

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"
)

// Header names. The activity header carries the minted key and policy from the
// workflow to the activity; the workflow header carries the continue-as-new generation.
const (
	headerKey        = "idemgate"
	headerGeneration = "idemgate-generation"
)

// headerParent carries a child workflow's parent token in the child's start header
// (and over the child's continue-as-new): the child's key scope derives from it.
const headerParent = "idemgate-parent"

// callHeader travels from the workflow to the activity.
type callHeader struct {
	// Key is the minted occurrence key.
	Key string `json:"k"`
	// Scope identifies the key scope (for identifying-field keys).
	Scope string `json:"s"`
	// Business is the caller's key from WithKey; HasBusiness says WithKey was used
	// (so an empty business key is refused, not ignored).
	Business    string `json:"b,omitempty"`
	HasBusiness bool   `json:"hb,omitempty"`
	// Rerun is set under WithRerunPolicy (wire name "r" kept).
	Rerun *RerunPolicy `json:"r,omitempty"`
	// Standalone is the caller's activity ID of a standalone activity, written by
	// NewClientInterceptor.
	Standalone string `json:"sa,omitempty"`
	// Store is the identity of the claim store of the workflow worker that minted
	// the key (store.Gate.Identity): an activity worker on another store refuses
	// the write. Empty (older workflows, a client without a store): not checked.
	Store string `json:"st,omitempty"`
	// Root is the workflow ID of the root of the scheduling workflow's chain
	// (workflow.Info.RootWorkflowExecution; the workflow's own ID when it is the
	// root): the workflow whose reset can re-create the call with the same key under
	// a child workflow ID of its own. The claim's record carries it
	// (store.Claim.RootWorkflowID). Empty (older workflow workers): the store
	// compares the activity's own workflow ID.
	Root string `json:"rt,omitempty"`
}

var jsonPlain = map[string][]byte{"encoding": []byte("json/plain")}

func (h callHeader) payload() (*commonpb.Payload, error) {
	data, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return &commonpb.Payload{Metadata: jsonPlain, Data: data}, nil
}

// readHeader decodes the call header as json.Unmarshal does. What a gate writes
// (json.Marshal of a callHeader without a rerun policy) is read by decodeHeader,
// once per attempt, without encoding/json's scan and reflection; anything else goes
// to json.Unmarshal.
func readHeader(fields map[string]*commonpb.Payload) (callHeader, bool) {
	p := fields[headerKey]
	if p == nil {
		return callHeader{}, false
	}
	if h, ok := decodeHeader(p.Data); ok {
		return h, true
	}
	var h callHeader
	if err := json.Unmarshal(p.Data, &h); err != nil {
		return callHeader{}, false
	}
	return h, true
}

// decodeHeader reads the subset of JSON that json.Marshal writes for a callHeader
// without Rerun: one object, no white space, each field at most once under its
// exact name, strings of valid UTF-8 whose escapes are the single-character ones
// or \uXXXX outside the surrogates (a scope's NULs arrive as \u0000), "hb" a bare
// true or false. Within it, the result is the one json.Unmarshal gives
// (FuzzDecodeHeaderMatchesJSON); ok is false for everything else, which the
// caller hands to json.Unmarshal.
func decodeHeader(b []byte) (h callHeader, ok bool) {
	n := len(b)
	if n < 2 || b[0] != '{' || b[n-1] != '}' {
		return callHeader{}, false
	}
	if n == 2 {
		return h, true
	}
	var seen uint8
	i := 1
	for {
		// "name":
		if i >= n || b[i] != '"' {
			return callHeader{}, false
		}
		j := i + 1
		for j < n && b[j] >= 'a' && b[j] <= 'z' {
			j++
		}
		if j+1 >= n || b[j] != '"' || b[j+1] != ':' {
			return callHeader{}, false
		}
		var bit uint8
		var dst *string
		switch string(b[i+1 : j]) {
		case "k":
			bit, dst = 1<<0, &h.Key
		case "s":
			bit, dst = 1<<1, &h.Scope
		case "b":
			bit, dst = 1<<2, &h.Business
		case "sa":
			bit, dst = 1<<3, &h.Standalone
		case "st":
			bit, dst = 1<<4, &h.Store
		case "rt":
			bit, dst = 1<<5, &h.Root
		case "hb":
			bit = 1 << 6
		default: // "r", another spelling, an unknown field
			return callHeader{}, false
		}
		if seen&bit != 0 { // a repeated field: json.Unmarshal decides
			return callHeader{}, false
		}
		seen |= bit
		i = j + 2
		if dst == nil { // "hb"
			switch {
			case n-i >= 4 && string(b[i:i+4]) == "true":
				h.HasBusiness = true
				i += 4
			case n-i >= 5 && string(b[i:i+5]) == "false":
				i += 5
			default:
				return callHeader{}, false
			}
		} else if *dst, i, ok = headerString(b, i); !ok {
			return callHeader{}, false
		}
		if i >= n {
			return callHeader{}, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			if i+1 != n {
				return callHeader{}, false
			}
			return h, true
		default:
			return callHeader{}, false
		}
	}
}

// headerString reads the JSON string that starts at b[i] for decodeHeader, and
// returns it and the index after its closing quote.
func headerString(b []byte, i int) (s string, next int, ok bool) {
	n := len(b)
	if i >= n || b[i] != '"' {
		return "", 0, false
	}
	i++
	start := i
	for i < n && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	if i < n && b[i] == '"' {
		if !utf8.Valid(b[start:i]) { // json.Unmarshal would write U+FFFD
			return "", 0, false
		}
		return string(b[start:i]), i + 1, true
	}
	var stack [256]byte
	out := append(stack[:0], b[start:i]...)
	for i < n {
		c := b[i]
		switch {
		case c == '"':
			// Decoded runes are whole sequences: out is valid UTF-8 exactly when
			// every unescaped run between them is.
			if !utf8.Valid(out) {
				return "", 0, false
			}
			return string(out), i + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= n {
			return "", 0, false
		}
		switch e := b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+6 > n {
				return "", 0, false
			}
			var r rune
			for _, x := range b[i+2 : i+6] {
				switch {
				case x >= '0' && x <= '9':
					x -= '0'
				case x >= 'a' && x <= 'f':
					x -= 'a' - 10
				case x >= 'A' && x <= 'F':
					x -= 'A' - 10
				default:
					return "", 0, false
				}
				r = r<<4 | rune(x)
			}
			if utf16.IsSurrogate(r) { // pairs and lone halves: json.Unmarshal decides
				return "", 0, false
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default:
			return "", 0, false
		}
		i += 2
	}
	return "", 0, false
}

// setToken writes a parent token to a workflow start header (nil: nothing to do).
func setToken(fields map[string]*commonpb.Payload, token string) {
	if fields == nil || token == "" {
		return
	}
	data, _ := json.Marshal(token) // a string always marshals
	fields[headerParent] = &commonpb.Payload{Metadata: jsonPlain, Data: data}
}

// readToken reads the parent token from a workflow start header ("" when none).
func readToken(fields map[string]*commonpb.Payload) string {
	var token string
	if p := fields[headerParent]; p != nil {
		_ = json.Unmarshal(p.Data, &token)
	}
	return token
}
