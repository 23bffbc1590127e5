package stripemocktest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"yosan/billing/stripemocktest"
)

func TestStart(t *testing.T) {
	t.Parallel()
	began := time.Now()
	s := stripemocktest.Start(t)
	t.Logf("stripe-mock answered after %s", time.Since(began))

	t.Run("RecordsAndForwards", func(t *testing.T) {
		s.Reset()
		form := url.Values{"name": {"Acme"}, "metadata[yosan_org_id]": {"org_1"}}
		status, body := post(t, s.URL+"/v1/customers", stripemocktest.Key, "key-1", form)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		var obj struct{ ID, Object string }
		if err := json.Unmarshal([]byte(body), &obj); err != nil || obj.Object != "customer" || obj.ID == "" {
			t.Fatalf("want a customer from stripe-mock, got %q (%v)", body, err)
		}
		reqs := s.Requests()
		if len(reqs) != 1 {
			t.Fatalf("want 1 request, got %v", reqs)
		}
		r := reqs[0]
		if r.Method != http.MethodPost || r.Path != "/v1/customers" || r.IdempotencyKey != "key-1" || r.Down {
			t.Errorf("recorded %v", r)
		}
		if r.Form.Get("name") != "Acme" || r.Form.Get("metadata[yosan_org_id]") != "org_1" {
			t.Errorf("recorded form %v", r.Form)
		}
	})

	t.Run("ValidatesAgainstSpec", func(t *testing.T) {
		status, body := post(t, s.URL+"/v1/customers", stripemocktest.Key, "", url.Values{"no_such_param": {"x"}})
		if status != http.StatusBadRequest {
			t.Fatalf("want 400 for an unknown parameter, got %d: %s", status, body)
		}
	})

	t.Run("BadKey", func(t *testing.T) {
		status, body := post(t, s.URL+"/v1/customers", "nope", "", nil)
		if status != http.StatusUnauthorized {
			t.Fatalf("want 401, got %d: %s", status, body)
		}
	})

	t.Run("Down", func(t *testing.T) {
		s.Reset()
		s.SetDown(true)
		status, body := post(t, s.URL+"/v1/customers", stripemocktest.Key, "key-2", nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, `"api_error"`) {
			t.Fatalf("want 503 api_error, got %d: %s", status, body)
		}
		s.SetDown(false)
		if status, body := post(t, s.URL+"/v1/customers", stripemocktest.Key, "key-2", nil); status != http.StatusOK {
			t.Fatalf("up again: want 200, got %d: %s", status, body)
		}
		reqs := s.Requests()
		if len(reqs) != 2 || !reqs[0].Down || reqs[1].Down {
			t.Fatalf("want one down and one forwarded request, got %v", reqs)
		}
	})

	t.Run("Stub", func(t *testing.T) {
		s.Reset()
		const paid = `{"id":"in_1","object":"invoice","status":"paid"}`
		s.Stub(http.MethodGet, "/v1/invoices/in_1", http.StatusOK, paid)
		status, body := get(t, s.URL+"/v1/invoices/in_1", stripemocktest.Key)
		if status != http.StatusOK || body != paid {
			t.Fatalf("want the stub, got %d: %s", status, body)
		}
		// Other paths still reach stripe-mock, whose invoice fixture is a draft.
		status, body = get(t, s.URL+"/v1/invoices/in_2", stripemocktest.Key)
		var inv struct{ ID, Status string }
		if err := json.Unmarshal([]byte(body), &inv); err != nil || status != http.StatusOK || inv.ID != "in_2" || inv.Status != "draft" {
			t.Fatalf("want stripe-mock's draft fixture, got %d: %s", status, body)
		}
		reqs := s.Requests()
		if len(reqs) != 2 || !reqs[0].Stubbed || reqs[1].Stubbed {
			t.Fatalf("want one stubbed and one forwarded request, got %v", reqs)
		}
		s.Reset()
		if _, body := get(t, s.URL+"/v1/invoices/in_1", stripemocktest.Key); body == paid {
			t.Error("the stub outlived Reset")
		}
	})

	t.Run("Reset", func(t *testing.T) {
		s.Reset()
		if reqs := s.Requests(); len(reqs) != 0 {
			t.Fatalf("want no requests after Reset, got %v", reqs)
		}
	})
}

// get sends a GET the way stripe-go does and returns the status and body.
func get(t *testing.T, u, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// post sends a form POST the way stripe-go does and returns the status and body.
func post(t *testing.T, u, key, idempotencyKey string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+key)
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
