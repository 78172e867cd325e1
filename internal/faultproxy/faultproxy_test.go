package faultproxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/faultproxy"
)

// server is a stand-in target that records the bodies it applied, in order.
type server struct {
	mu      sync.Mutex
	applied []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.applied = append(s.applied, string(b))
	s.mu.Unlock()
	w.Header().Set("X-Applied", string(b))
	_, _ = fmt.Fprintf(w, `{"ok":%q}`, b)
}

func (s *server) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.applied...)
}

func start(t *testing.T) (*server, *faultproxy.Proxy) {
	t.Helper()
	s := &server{}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	p, err := faultproxy.Start(ts.URL)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return s, p
}

func post(c *http.Client, p *faultproxy.Proxy, op, body string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/", bytes.NewBufferString(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

func TestKinds(t *testing.T) {
	for _, k := range faultproxy.Kinds {
		t.Run(k.String(), func(t *testing.T) {
			s, p := start(t)
			p.SetRule(faultproxy.Rule{Kind: k, Limit: 1, Delay: 300 * time.Millisecond})
			c := &http.Client{Timeout: 100 * time.Millisecond}
			status, body, err := post(c, p, "UpdateItem", `{"TableName":"t","n":1}`)
			switch k {
			case faultproxy.ApplyThen500:
				require.NoError(t, err)
				assert.Equal(t, http.StatusInternalServerError, status)
				assert.Contains(t, body, "InternalServerError")
			case faultproxy.ApplyThenDrop:
				require.Error(t, err, "the connection must close without an answer")
			case faultproxy.DelayThenApply:
				require.Error(t, err, "the client must time out")
				// A request sent during the delay reaches the server after the delayed one.
				c2 := &http.Client{Timeout: 5 * time.Second}
				status, body, err = post(c2, p, "UpdateItem", `{"TableName":"t","n":2}`)
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, status)
				assert.Equal(t, `{"ok":"{\"TableName\":\"t\",\"n\":2}"}`, body)
			}
			require.Eventually(t, func() bool { return len(s.list()) >= 1 }, 5*time.Second, 10*time.Millisecond)
			assert.Equal(t, `{"TableName":"t","n":1}`, s.list()[0], "the faulted request was applied first")
			fs := p.Faults()
			require.Len(t, fs, 1)
			assert.Equal(t, k, fs[0].Kind)
			assert.Equal(t, "UpdateItem", fs[0].Request.Op)
			assert.Equal(t, "t", fs[0].Request.Table)
			assert.Equal(t, http.StatusOK, fs[0].Status)
			assert.Equal(t, `{"ok":"{\"TableName\":\"t\",\"n\":1}"}`, string(fs[0].Response))

			// Limit 1: the next write passes.
			status, body, err = post(&http.Client{Timeout: 5 * time.Second}, p, "UpdateItem", `{"n":3}`)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, status)
			assert.Equal(t, `{"ok":"{\"n\":3}"}`, body)
		})
	}
}

func TestEveryAndMatch(t *testing.T) {
	s, p := start(t)
	var hooked []string
	var mu sync.Mutex
	var seen []string
	p.OnFault(func(f faultproxy.Fault) { mu.Lock(); hooked = append(hooked, string(f.Request.Body)); mu.Unlock() })
	p.OnRequest(func(r faultproxy.Request) { mu.Lock(); seen = append(seen, r.Op+" "+string(r.Body)); mu.Unlock() })
	p.SetRule(faultproxy.Rule{Kind: faultproxy.ApplyThen500, Every: 3})
	c := &http.Client{Timeout: 5 * time.Second}
	var statuses []int
	for i := 1; i <= 7; i++ {
		op := "PutItem"
		if i == 4 {
			op = "GetItem" // not a write: neither faulted nor counted
		}
		st, _, err := post(c, p, op, fmt.Sprint(i))
		require.NoError(t, err)
		statuses = append(statuses, st)
	}
	// Candidates 1,2,3,5,6,7: the 3rd (request 3) and the 6th (request 7) are faulted.
	assert.Equal(t, []int{200, 200, 500, 200, 200, 200, 500}, statuses)
	assert.Equal(t, []string{"1", "2", "3", "4", "5", "6", "7"}, s.list(), "every request reached the server")
	assert.Equal(t, []string{"3", "7"}, hooked)
	assert.Equal(t, []string{"PutItem 1", "PutItem 2", "PutItem 3", "GetItem 4", "PutItem 5", "PutItem 6", "PutItem 7"}, seen,
		"OnRequest sees every request")
	assert.Equal(t, faultproxy.Stats{Requests: 7, Faults: 2}, p.Stats())

	p.SetRule(faultproxy.Rule{})
	st, _, err := post(c, p, "PutItem", "8")
	require.NoError(t, err)
	assert.Equal(t, 200, st)

	// Limit counts the faults since SetRule.
	p.SetRule(faultproxy.Rule{Kind: faultproxy.ApplyThen500, Limit: 1})
	for i, want := range []int{500, 200} {
		st, _, err := post(c, p, "PutItem", fmt.Sprint(9+i))
		require.NoError(t, err)
		assert.Equal(t, want, st)
	}
}

func TestBadTarget(t *testing.T) {
	_, err := faultproxy.Start("http://")
	assert.ErrorContains(t, err, "bad target")
}
