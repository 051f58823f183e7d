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
		// A credential nested in the URL of an endpoint= value (issue 37).
		"s3://b/p?endpoint=http://minio:pw0rd@h:9000":                                   "s3://b/p?endpoint=http%3A%2F%2Fminio%3Axxxxx%40h%3A9000",
		"s3://b/p?endpoint=" + "https://h:9000/%3FX-Amz-Security-Token%3Dsesstok":       "s3://b/p?endpoint=https%3A%2F%2Fh%3A9000%2F%3FX-Amz-Security-Token%3Dxxxxx",
		"s3://b/p?endpoint=https%3A%2F%2Fh%3A9000%2F%3FX-Amz-Security-Token%3Dsesstok2": "s3://b/p?endpoint=https%3A%2F%2Fh%3A9000%2F%3FX-Amz-Security-Token%3Dxxxxx",
	} {
		got := URL(in)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
		for _, secret := range []string{"deadbeef", "AKIA", "s3cret", "hunter2", "abc", "pw0rd", "sesstok"} {
			if strings.Contains(in, secret) && strings.Contains(got, secret) {
				t.Errorf("URL(%q) = %q still holds %q", in, got, secret)
			}
		}
	}
}
