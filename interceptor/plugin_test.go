package interceptor_test

import (
	"context"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store/memory"
)

func TestNewPluginValidates(t *testing.T) {
	_, err := interceptor.NewPlugin(interceptor.Options{Window: -1}, interceptor.PluginOptions{ProbeTimeout: -1})
	if err == nil {
		t.Fatal("NewPlugin accepted a nil store, a negative window and a negative probe timeout")
	}
	for _, want := range []string{"Options.Store is nil", "Options.Window", "PluginOptions.ProbeTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// On a client the plugin adds the client interceptor that keys standalone
// activities — once, however often the options pass through it.
func TestPluginConfiguresClientOnce(t *testing.T) {
	pl, err := interceptor.NewPlugin(interceptor.Options{Store: memory.New()}, interceptor.PluginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	co := client.Options{Interceptors: []sdkinterceptor.ClientInterceptor{&sdkinterceptor.ClientInterceptorBase{}}}
	for range 2 {
		if err := pl.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &co}); err != nil {
			t.Fatal(err)
		}
	}
	if len(co.Interceptors) != 2 {
		t.Fatalf("client interceptors %d, want the user's and idemgate's", len(co.Interceptors))
	}
	if pl.Name() != interceptor.PluginName {
		t.Fatalf("name %q", pl.Name())
	}
}
