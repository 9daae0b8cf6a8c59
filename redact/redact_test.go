package redact

import (
	"strings"
	"testing"
)

// TestURL: every kind of secret a URL can carry is hidden, valid URL or
// not, and what says where the URL points stays.
func TestURL(t *testing.T) {
	const secret = "PLANTEDSECRET"
	cases := []struct{ in, want string }{
		{"s3://AKIA:" + secret + "@bucket?endpoint=http://127.0.0.1:9000&region=us-east-1",
			"s3://AKIA:***@bucket?endpoint=http://127.0.0.1:9000&region=us-east-1"},
		{"redis://:" + secret + "@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"},
		{"redis://user:" + secret + "@127.0.0.1:1/0", "redis://user:***@127.0.0.1:1/0"},
		{"https://" + secret + "@host/x", "https://***@host/x"},
		{"redis://alice@127.0.0.1:1/0", "redis://alice@127.0.0.1:1/0"},
		{"rediss://u:pa/ss?w@rd" + secret + "@h:6380/1", "rediss://u:***@h:6380/1"},
		{"s3://bucket?access_key=" + secret + "&secret_key=" + secret + "&region=r",
			"s3://bucket?access_key=***&secret_key=***&region=r"},
		{"azblob://c?sas_token=" + secret + "&sig=" + secret, "azblob://c?sas_token=***&sig=***"},
		{"gs://b?token=" + secret + "#frag", "gs://b?token=***#frag"},
		{"s3://b?X-Amz-Credential=" + secret + "&X-Amz-Security-Token=" + secret, "s3://b?X-Amz-Credential=***&X-Amz-Security-Token=***"},
		{"s3://b?endpoint=http://ak:" + secret + "@minio:9000&region=r", "s3://***@minio:9000&region=r"},
		{"s3://b?endpoint=http%3A%2F%2Fak%3A" + secret + "%40minio%3A9000", "s3://b?endpoint=http%3A%2F%2Fak%3A%2A%2A%2A%40minio%3A9000"},
		{"s3://b?token=abc@" + secret, "s3://b?token=***"},
		{"s3://AKIA:PLANTED%zz" + secret + "@bucket", "s3://AKIA:***@bucket"},
		{"redis://:" + secret + "@[::1", "redis://:***@[::1"},
		{":" + secret + "@127.0.0.1:6379", ":***@127.0.0.1:6379"},
		{"file:///var/lib/echostore/remote", "file:///var/lib/echostore/remote"},
		{"s3://bucket?endpoint=http://127.0.0.1:9000&prefix=a/b/", "s3://bucket?endpoint=http://127.0.0.1:9000&prefix=a/b/"},
		{"", ""},
	}
	for _, c := range cases {
		got := URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, secret) || strings.Contains(got, "PLANTED") {
			t.Errorf("URL(%q) = %q shows the secret", c.in, got)
		}
	}
}

// TestSecretsScrub: Scrub with the Secrets of a URL cleans a text that
// quotes the URL's parts in other ways (a driver's error).
func TestSecretsScrub(t *testing.T) {
	u := "redis://user:Pa55%2Fword@h:1/0?token=T0KEN1&db=1"
	text := `dial "redis://user:Pa55%2Fword@h:1/0": password Pa55/word refused; token T0KEN1`
	got := Scrub(text, Secrets(u)...)
	for _, s := range []string{"Pa55", "T0KEN1"} {
		if strings.Contains(got, s) {
			t.Errorf("Scrub left %q in %q", s, got)
		}
	}
	if Scrub("nothing here", Secrets("file:///x")...) != "nothing here" {
		t.Error("Scrub changed a text without secrets")
	}
}
