package main

import (
	"time"

	"github.com/idemgate/idemgate/interceptor"
)

// opTimeout bounds one command's work against the store.
const opTimeout = time.Minute

// businessKey turns --key (with --namespace and --activity, a business key given to
// interceptor.WithKey) into the stored key; without --namespace, --key is the stored key.
func businessKey(key, namespace, activity string) (string, error) {
	if namespace == "" {
		return key, nil
	}
	if key == "" || activity == "" {
		return "", usagef("--namespace turns a business key (the one given to interceptor.WithKey) into the stored key; " +
			"it needs the key and --activity NAME too")
	}
	return interceptor.BusinessKey(namespace, activity, key), nil
}
