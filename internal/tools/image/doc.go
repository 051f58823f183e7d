// Command image builds Talon's container image without a container daemon:
// a multi-platform OCI image layout whose images hold only the static talon
// binary (as /ko-app/talon, the entrypoint: the path ko gives it in the
// release image) and /etc/passwd and /etc/group naming
// the unprivileged user 65532 (nonroot) that the image runs as. There is no
// shell and no package manager. TLS roots come from the binary itself
// (golang.org/x/crypto/x509roots/fallback), so the image needs no CA bundle.
//
// `make image` runs it; release images are built by goreleaser's kos
// section instead, on a distroless base with the same user and entrypoint.
//
//	go run ./internal/tools/image -out dist/image -version v1.2.3 \
//	    -revision $(git rev-parse HEAD) linux/amd64=bin/linux_amd64/talon linux/arm64=bin/linux_arm64/talon
//
// Invariants:
//
//   - Reproducible. The same binaries, flags and creation time give the
//     same layout byte for byte: every file's mtime and the image's
//     created time are -created, else $SOURCE_DATE_EPOCH, else the Unix
//     epoch; tar headers are PAX with fixed modes; nothing reads the clock,
//     the host's users or the network.
//   - Fixed contents. Each platform's image has one layer: /ko-app/talon
//     (the entrypoint, 0755, as in the release image; PATH=/ko-app), /etc/passwd and /etc/group naming root and nonroot
//     (65532), and /tmp (1777). The user is User; the OCI labels are set on
//     each image config and as index and manifest annotations, and the
//     index's ref.name is the version.
//   - Linux only. Each argument must be linux/ARCH=PATH; anything else is
//     refused before a file is written.
//   - The output directory is replaced, not merged: -out is removed and
//     written anew, so no blob of an earlier build survives in it.
//   - Errors go to stderr prefixed "image:" and exit with status 1.
package main
