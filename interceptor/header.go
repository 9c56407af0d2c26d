package interceptor

import (
	"encoding/json"

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

func readHeader(fields map[string]*commonpb.Payload) (callHeader, bool) {
	p := fields[headerKey]
	if p == nil {
		return callHeader{}, false
	}
	var h callHeader
	if err := json.Unmarshal(p.Data, &h); err != nil {
		return callHeader{}, false
	}
	return h, true
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
