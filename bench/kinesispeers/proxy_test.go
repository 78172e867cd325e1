package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCountingProxyCountsByOperationAndTable(t *testing.T) {
	var bodies atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies.Add(int64(len(b)))
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer backend.Close()
	p, err := StartProxy(backend.URL)
	require.NoError(t, err)
	defer p.Close()
	require.True(t, strings.HasPrefix(p.URL, "http://127.0.0.1:"), p.URL)

	sent := int64(0)
	call := func(op, body string) {
		req, err := http.NewRequest("POST", p.URL, strings.NewReader(body))
		require.NoError(t, err)
		if op != "" {
			req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, `{}`, string(b)) // the backend's answer comes through
		sent += int64(len(body))
	}
	call("PutItem", `{"TableName":"p-leases","Item":{}}`)
	call("UpdateItem", `{"TableName":"p-readmodel","Key":{}}`)
	call("UpdateItem", `{"TableName":"p-readmodel","Key":{}}`)
	call("GetItem", `{"TableName":"p-readmodel","Key":{}}`)
	call("BatchWriteItem", `{"RequestItems":{"p-readmodel":[],"p-cursors":[]}}`)
	call("TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"p-cursors"}},{"Update":{"TableName":"p-readmodel"}},{"ConditionCheck":{"TableName":"p-cursors"}}]}`)
	call("DeleteItem", `{"TableName":"p-leases"}`)
	call("Query", `{"TableName":"p-leases"}`)
	call("", ``)

	require.Equal(t, sent, bodies.Load(), "the request bodies reach the backend whole")
	ops := p.Ops()
	require.Equal(t, map[string]int64{"PutItem": 1, "UpdateItem": 2, "GetItem": 1, "BatchWriteItem": 1,
		"TransactWriteItems": 1, "DeleteItem": 1, "Query": 1, "(none)": 1}, ops)
	require.Equal(t, int64(6), p.Writes())
	require.Equal(t, map[string]int64{"p-leases": 2, "p-readmodel": 4, "p-cursors": 2}, p.TableWrites())
	require.Equal(t, "(none)=1 BatchWriteItem=1 DeleteItem=1 GetItem=1 PutItem=1 Query=1 TransactWriteItems=1 UpdateItem=2", OpsString(ops))
}

func TestWriteTables(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"TableName":"a"}`, []string{"a"}},
		{`{"RequestItems":{"b":[],"a":[]}}`, []string{"a", "b"}},
		{`{"TransactItems":[{"Put":{"TableName":"b"}},{"Delete":{"TableName":"b"}}]}`, []string{"b"}},
		{`{}`, nil},
		{`not json`, nil},
	} {
		require.Equal(t, tc.want, WriteTables([]byte(tc.body)), tc.body)
	}
}
