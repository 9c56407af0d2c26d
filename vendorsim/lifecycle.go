package vendorsim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Start starts every vendor on a loopback port. Close stops them.
func Start() (*World, error) {
	w := &World{
		Docs:     newVendor("docs", Unkeyed),
		CRM:      newVendor("crm", Unkeyed),
		Tickets:  newVendor("tickets", IETF),
		Payments: newVendor("payments", StripeStyle),
		Email:    newVendor("email", Unkeyed),
		Chat:     newVendor("chat", Unkeyed),
	}
	w.Docs.mux.HandleFunc("GET /search", w.Docs.search)
	w.CRM.mux.HandleFunc("GET /customers/{id}", w.CRM.getCustomer)
	w.CRM.mux.HandleFunc("PUT /contacts/{email}", w.CRM.upsertContact)
	w.Tickets.mux.HandleFunc("POST /tickets", w.Tickets.keyed(w.Tickets.createTicket))
	w.Tickets.mux.HandleFunc("GET /tickets", w.Tickets.lookup("/tickets"))
	w.Payments.mux.HandleFunc("POST /v1/charges", w.Payments.keyed(w.Payments.createCharge))
	w.Payments.mux.HandleFunc("GET /v1/charges", w.Payments.lookup("/v1/charges"))
	w.Email.mux.HandleFunc("POST /v3/mail/send", w.Email.unkeyed(w.Email.sendMail))
	w.Chat.mux.HandleFunc("POST /api/chat.postMessage", w.Chat.unkeyed(w.Chat.postMessage))
	for _, v := range w.Vendors() {
		if err := v.start(); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// Close stops every vendor.
func (w *World) Close() {
	for _, v := range w.Vendors() {
		if v != nil && v.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = v.srv.Shutdown(ctx)
			cancel()
			_ = v.srv.Close()
		}
	}
}

func (v *Vendor) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("idemgate/vendorsim: %s: listen on loopback: %w", v.Name, err)
	}
	v.URL = "http://" + ln.Addr().String()
	v.srv = &http.Server{Handler: v.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = v.srv.Serve(ln) }()
	return nil
}
