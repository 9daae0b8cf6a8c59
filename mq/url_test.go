package mq

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		in   string
		want Endpoint
	}{
		{"redis://127.0.0.1:6379/0", Endpoint{Addrs: []string{"127.0.0.1:6379"}}},
		{"redis://localhost", Endpoint{Addrs: []string{"localhost:6379"}}},
		{"REDIS://h:1/3", Endpoint{Addrs: []string{"h:1"}, DB: 3}},
		{"rediss://u:p%40ss%2Fw@h:6380/2?timeout=3s&dial_timeout=1s&client_name=x",
			Endpoint{Addrs: []string{"h:6380"}, TLS: true, Username: "u", Password: "p@ss/w", DB: 2,
				Timeout: 3 * time.Second, DialTimeout: time.Second, ClientName: "x"}},
		{"redis://:secret@h", Endpoint{Addrs: []string{"h:6379"}, Password: "secret"}},
		{"redis://h1:7000,h2:7001,h3?addr=h4:7003&addr=h5", Endpoint{Addrs: []string{"h1:7000", "h2:7001", "h3:6379", "h4:7003", "h5:6379"}}},
		{"redis://[::1]:7000,[::1]/1", Endpoint{Addrs: []string{"[::1]:7000", "[::1]:6379"}, DB: 1}},
		{"redis://h?db=4&allow_eviction=true", Endpoint{Addrs: []string{"h:6379"}, DB: 4, AllowEviction: true}},
		{"rediss://h?skip_verify=true&ca_file=/x.pem", Endpoint{Addrs: []string{"h:6379"}, TLS: true, SkipVerify: true, CAFile: "/x.pem"}},
	}
	for _, tc := range cases {
		got, err := ParseURL(tc.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if tc.want.DialTimeout == 0 {
			tc.want.DialTimeout = DefaultDialTimeout
		}
		if tc.want.Timeout == 0 {
			tc.want.Timeout = DefaultTimeout
		}
		if !slices.Equal(got.Addrs, tc.want.Addrs) {
			t.Errorf("ParseURL(%q).Addrs = %q, want %q", tc.in, got.Addrs, tc.want.Addrs)
		}
		if !equalEndpoint(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func equalEndpoint(a, b Endpoint) bool {
	a.Addrs, b.Addrs = nil, nil
	return a.TLS == b.TLS && a.Username == b.Username && a.Password == b.Password && a.DB == b.DB &&
		a.DialTimeout == b.DialTimeout && a.Timeout == b.Timeout && a.ClientName == b.ClientName &&
		a.CAFile == b.CAFile && a.SkipVerify == b.SkipVerify && a.AllowEviction == b.AllowEviction
}

func TestParseURLRejects(t *testing.T) {
	for _, in := range []string{
		"", "127.0.0.1:6379", "http://h", "redis://", "redis://h:0", "redis://h:99999", "redis://h:x",
		"redis://h/x", "redis://h/-1", "redis://h?db=x", "redis://h?timeout=-1s", "redis://h?dial_timeout=x",
		"redis://h?nope=1", "redis://h?skip_verify=true", "redis://h,,h2", "redis://h?allow_eviction=maybe",
	} {
		if _, err := ParseURL(in); !errors.Is(err, ErrBadURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrBadURL", in, err)
		}
	}
	_, err := ParseURL("redis://user:hunter2@h?nope=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
	ep, _ := ParseURL("redis://user:hunter2@h")
	if strings.Contains(ep.String(), "hunter2") {
		t.Errorf("String shows the password: %s", ep)
	}
}
