package interceptor_test

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/idemgate/idemgate/interceptor"
)

// Start a standalone activity (no workflow) as one write: its key is the activity ID
// "order-4217/charge". A retry, or the same ID started again after it closed, returns
// the stored result. The workers that run the activity use interceptor.New as usual.
func ExampleNewClientInterceptor() {
	c, err := client.Dial(client.Options{
		Interceptors: []sdkinterceptor.ClientInterceptor{interceptor.NewClientInterceptor()},
	})
	if err != nil {
		return
	}
	defer c.Close()
	h, err := c.ExecuteActivity(context.Background(), client.StartActivityOptions{
		ID: "order-4217/charge", TaskQueue: "payments", StartToCloseTimeout: time.Minute,
	}, "ChargeCard", 4200)
	if err != nil {
		return
	}
	var receipt string
	_ = h.Get(context.Background(), &receipt)
}
