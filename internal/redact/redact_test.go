package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://blobs.example/p?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA/x&X-Amz-Signature=deadbeef": "https://blobs.example/p?X-Amz-Algorithm=xxxxx&X-Amz-Credential=xxxxx&X-Amz-Signature=xxxxx",
		"s3://b/p?region=eu-west-1&endpoint=http://h:9000&token=abc":                                    "s3://b/p?endpoint=http%3A%2F%2Fh%3A9000&region=eu-west-1&token=xxxxx",
		"http://user:s3cret@h/p":                  "http://user:xxxxx@h/p",
		"http://user@h/p":                         "http://user@h/p",
		"file:///var/blobs":                       "file:///var/blobs",
		"https://h/p#access_token=abc":            "https://h/p#xxxxx",
		"http://u:p@h/%zz?sig=1":                  "http://xxxxx@h/%zz?xxxxx",
		"https://h/p?password=hunter2&profile=ci": "https://h/p?password=xxxxx&profile=ci",
	} {
		got := URL(in)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
		for _, secret := range []string{"deadbeef", "AKIA", "s3cret", "hunter2", "abc"} {
			if strings.Contains(in, secret) && strings.Contains(got, secret) {
				t.Errorf("URL(%q) = %q still holds %q", in, got, secret)
			}
		}
	}
}
