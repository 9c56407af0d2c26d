package interceptor

import (
	"errors"

	commonpb "go.temporal.io/api/common/v1"
)

// SetTestKey writes into an activity's header fields what WithKey(ctx, key)
// gives an activity scheduled by a workflow, unless the header already carries a
// key (then it reports false). It is for activity tests that run no workflow
// (testsuite.TestActivityEnvironment), where nothing mints a key and a write is
// refused with IdempotencyKeyMissing; package idemgatetest calls it from an
// interceptor placed before the gate. The key follows WithKey's rules (16 to 255
// characters, scoped by namespace and activity type).
func SetTestKey(fields map[string]*commonpb.Payload, key string) (bool, error) {
	if fields == nil {
		return false, errors.New("idemgate: SetTestKey: the context carries no activity header (call it from an activity interceptor)")
	}
	if _, ok := fields[headerKey]; ok {
		return false, nil
	}
	p, err := callHeader{Business: key, HasBusiness: true}.payload()
	if err != nil {
		return false, err
	}
	fields[headerKey] = p
	return true, nil
}
