package idemgatetest_test

import (
	"testing"

	"github.com/idemgate/idemgate/idemgatetest"
)

// The test's own key (KeyHeader) makes every call of the environment the same
// write, for local calls as for the others: the second is answered from the store.
func TestActivityEnvironmentKeyHeaderLocalCalls(t *testing.T) {
	for _, local := range []bool{false, true} {
		w, tools := world(t)
		k := idemgatetest.New(t)
		env := k.NewActivityEnvironment()
		env.RegisterActivity(tools)
		env.SetHeader(idemgatetest.KeyHeader("welcome-mail/cus_42"))
		for i := range 2 {
			var err error
			if local {
				_, err = env.ExecuteLocalActivity(tools.SendEmail, mail)
			} else {
				_, err = env.ExecuteActivity(tools.SendEmail, mail)
			}
			if err != nil {
				t.Fatalf("local %v call %d: %v", local, i+1, err)
			}
		}
		ds := k.Decisions("SendEmail")
		if len(ds) != 2 || ds[0].Key != ds[1].Key || w.Email.Total() != 1 || k.BodyRuns("SendEmail") != 1 {
			t.Fatalf("local %v: decisions %+v; e-mails %d, body runs %d; want one write sent once", local, ds, w.Email.Total(), k.BodyRuns("SendEmail"))
		}
	}
}
