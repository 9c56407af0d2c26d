package interceptor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
)

// ToolName says where a generic tool-calling activity's arguments name the tool it
// calls (Options.ToolNames). The tool's name is Prefix followed by the fields' string
// values joined with ".": Prefix "mcp." and Fields {"server", "tool"} give
// "mcp.crm.create_contact", the name package mcptools registers that tool under.
type ToolName struct {
	// Prefix goes before the values. Optional.
	Prefix string
	// Fields are a struct argument's fields (JSON or Go name) or a map argument's keys,
	// in the one argument that has them (a field that two arguments have, a model's
	// map beside the caller's struct, is refused as invalid arguments); "$N" is the
	// N-th argument itself (from 1), for activities that take the tool positionally.
	// Each must be a non-empty string.
	// A map's key must be the field's name exactly: the arguments come from a model,
	// so a map that also has a key differing only in case ("Tool" beside "tool") is
	// refused as invalid arguments, and nothing runs.
	Fields []string
}

// effectiveName is the name a call is classified, keyed and recorded by: the tool's
// name for a generic tool-calling activity, else the activity type.
func (o *Options) effectiveName(activityType string, args []any) (string, error) {
	tn, ok := o.ToolNames[activityType]
	if !ok {
		return activityType, nil
	}
	var b strings.Builder
	b.WriteString(tn.Prefix)
	for i, f := range tn.Fields {
		v, err := toolField(args, f)
		var amb *canon.AmbiguousError
		if errors.As(err, &amb) {
			return "", fmt.Errorf("idemgate: %s: the tool name field %q is ambiguous: %v. The arguments are untrusted "+
				"input (a model writes them), so the call is refused as invalid arguments. Nothing was run. Next step: "+
				"send the tool's name under the key %q only, in one argument (or name that argument with \"$N\" in "+
				"Options.ToolNames)", activityType, f, amb, f)
		}
		if err != nil {
			return "", fmt.Errorf("idemgate: %s: the tool name field %q %v; Options.ToolNames[%q] names the tool "+
				"by %q. Nothing was run. Next step: pass the tool's name there, or fix Options.ToolNames[%q]",
				activityType, f, err, activityType, tn.Fields, activityType)
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func toolField(args []any, f string) (string, error) {
	var raw []byte
	if n, err := strconv.Atoi(strings.TrimPrefix(f, "$")); err == nil && strings.HasPrefix(f, "$") {
		if n < 1 || n > len(args) {
			return "", fmt.Errorf("is missing (the call has %d arguments)", len(args))
		}
		if s, ok := args[n-1].(string); ok && s != "" {
			return s, nil
		}
		if raw, err = canon.Encode(nil, args[n-1:n]); err != nil {
			return "", fmt.Errorf("cannot be read: %v", err)
		}
		raw = []byte(strings.TrimSuffix(strings.TrimPrefix(string(raw), "["), "]"))
	} else {
		v, ok, err := canon.ExactField(args, f)
		var amb *canon.AmbiguousError
		if errors.As(err, &amb) {
			return "", err
		}
		if err != nil {
			return "", fmt.Errorf("cannot be read: %v", err)
		}
		if !ok {
			return "", fmt.Errorf("is not in the arguments")
		}
		raw = v
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || s == "" {
		return "", fmt.Errorf("is %s, not a non-empty string", raw)
	}
	return s, nil
}
