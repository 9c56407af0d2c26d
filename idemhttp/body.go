package idemhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// setJSONField returns body, a JSON object, with its top-level field set to the string
// value: every existing occurrence is replaced in place, or the field is added first.
// All other bytes are kept as they were (order, spacing, numbers).
func setJSONField(body []byte, field, value string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("JSON but not an object: it starts with %v", tok)
	}
	open := int(dec.InputOffset())
	var spans [][2]int // byte ranges of the field's values
	members := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		members++
		if kt == field {
			end := int(dec.InputOffset())
			spans = append(spans, [2]int{end - len(raw), end})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not JSON: data after the object")
	}

	val, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		name, _ := json.Marshal(field)
		out := make([]byte, 0, len(body)+len(name)+len(val)+2)
		out = append(out, body[:open]...)
		out = append(out, name...)
		out = append(out, ':')
		out = append(out, val...)
		if members > 0 {
			out = append(out, ',')
		}
		return append(out, body[open:]...), nil
	}
	out := make([]byte, 0, len(body)+len(spans)*len(val))
	last := 0
	for _, s := range spans {
		out = append(out, body[last:s[0]]...)
		out = append(out, val...)
		last = s[1]
	}
	return append(out, body[last:]...), nil
}
