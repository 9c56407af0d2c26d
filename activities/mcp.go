package activities

import (
	"encoding/json"

	"github.com/idemgate/idemgate/mcptools"
)

// MCPTools describes an MCP server's tools for planners, next to Registry: each is
// named by its activity ("mcp.SERVER.TOOL"), with the server's description and input
// schema, and a call's arguments are checked against that schema before it is made.
func MCPTools(b *mcptools.Bridge) Toolset {
	defs := b.Tools()
	out := make(Toolset, 0, len(defs))
	for _, name := range b.Names() {
		def := defs[name]
		schema := json.RawMessage(`{"type":"object"}`)
		if def.InputSchema != nil {
			if raw, err := json.Marshal(def.InputSchema); err == nil {
				schema = raw
			}
		}
		out = append(out, NewTool(name, def.Description, schema, func(args map[string]any) error {
			return b.CheckArgs(name, args)
		}))
	}
	return out
}
