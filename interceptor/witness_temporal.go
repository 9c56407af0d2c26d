package interceptor

import (
	"context"

	"github.com/idemgate/idemgate/witness"
)

// builtinWitnesses are the witnesses the gate always asks first: Temporal's
// history, when ctx carries the worker's client.
func (r *root) builtinWitnesses(ctx context.Context) []witness.Witness {
	return nil
}
