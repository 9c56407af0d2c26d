package interceptor

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/store/memory"
)

// TestPluginStoreNameRedacted: the error that keeps a worker from starting names
// the store without its secrets, in every form a DSN takes, and scrubs them from
// the store's own error text.
func TestPluginStoreNameRedacted(t *testing.T) {
	const pw = "Zq7-PW"
	for _, c := range []struct{ name, secret, shown string }{
		{"postgres://app:" + pw + "@db/x", pw, "postgres://app:xxxxx@db/x"},
		{"postgres://app@db/x?password=" + pw, pw, "postgres://app@db/x?password=xxxxx"},
		{"postgres://app@db/x?sslmode=require&sslpassword=" + pw, pw, "postgres://app@db/x?sslmode=require&sslpassword=xxxxx"},
		{`host=db user=app password='p w\'` + pw + `' dbname=x`, "p w'" + pw, "host=db user=app password=xxxxx dbname=x"},
		{"host=db user=app password=" + pw + " dbname=x", pw, "host=db user=app password=xxxxx dbname=x"},
	} {
		o, err := Options{Store: memory.New()}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		pl := &Plugin{gate: newRoot(o), p: PluginOptions{StoreName: c.name}}
		cause := errors.New("connect " + c.name + " failed: password " + c.secret + " rejected")
		msg := pl.storeDown("claim a key", cause).Error()
		if strings.Contains(msg, pw) || !strings.Contains(msg, "the store "+c.shown+" could not claim a key") {
			t.Errorf("StoreName %q: %s\nwant the store shown as %q and no password", c.name, msg, c.shown)
		}
	}
}
