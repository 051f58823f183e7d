package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// File is the file:// backend: objects are regular files below Dir.
// It holds no open descriptors between calls and is safe for concurrent use.
type File struct {
	dir string
}

// NewFile returns the store of the objects below dir, which must be an
// existing directory.
func NewFile(dir string) (*File, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: file store directory is empty: write file:///abs/dir", ErrInvalidURL)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: file store directory %q: %w", ErrInvalidURL, dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: file store directory %q: not a directory", ErrInvalidURL, dir)
	}
	return &File{dir: dir}, nil
}

// Dir returns the directory the store reads.
func (s *File) Dir() string { return s.dir }

// String describes the store for logs.
func (s *File) String() string { return "file://" + s.dir }

// open opens object for reading without leaving dir (os.Root refuses
// paths and symlinks that resolve outside it) and checks that it is a
// regular file before anything reads it.
func (s *File) open(ctx context.Context, object string) (*os.File, int64, error) {
	f, fi, err := s.openInfo(ctx, object)
	if err != nil {
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func (s *File) openInfo(ctx context.Context, object string) (*os.File, fs.FileInfo, error) {
	if err := ValidateKey(object); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, nil, s.mapErr(object, err)
	}
	// Non-blocking, so that opening a FIFO (which blocks until a writer
	// comes) returns at once and the regular-file check below refuses it;
	// regular files read the same either way.
	f, err := root.OpenFile(object, os.O_RDONLY|openNonBlock, 0)
	root.Close()
	if err != nil {
		return nil, nil, s.mapErr(object, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, s.mapErr(object, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: object %q in %s: not a regular file", ErrNotFound, object, s)
	}
	return f, fi, nil
}

// fileVersion names a file's content by its size and modification time
// in nanoseconds.
func fileVersion(fi fs.FileInfo) string {
	return "f" + strconv.FormatInt(fi.Size(), 10) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// Stat returns the file's size and version (size and modification time).
// Files have no checksum.
func (s *File) Stat(ctx context.Context, object string) (Info, error) {
	f, fi, err := s.openInfo(ctx, object)
	if err != nil {
		return Info{}, err
	}
	f.Close()
	return Info{Size: fi.Size(), Version: fileVersion(fi)}, nil
}

// ReadVersion is ReadRange of the file when its size and modification
// time are still version's. The check is made on the open descriptor, so
// a file replaced by a rename after the check is read as it was; an
// in-place rewrite during the read is not detected.
func (s *File) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	if err := checkRange(object, off, length); err != nil {
		return nil, err
	}
	f, fi, err := s.openInfo(ctx, object)
	if err != nil {
		return nil, err
	}
	if version != "" && fileVersion(fi) != version {
		f.Close()
		return nil, fmt.Errorf("%w: object %q in %s is at version %s, not %s", ErrVersionChanged, object, s, fileVersion(fi), version)
	}
	return &fileReader{ctx: ctx, f: f, r: io.NewSectionReader(f, off, length), name: object, store: s}, nil
}

func (s *File) mapErr(object string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: object %q in %s", ErrNotFound, object, s)
	case isEscape(err):
		// A symlink leading out of the directory: to a reader of this
		// store the object does not exist.
		return fmt.Errorf("%w: object %q in %s: resolves outside the store directory", ErrNotFound, object, s)
	}
	return fmt.Errorf("%w: object %q in %s: %w", ErrBackend, object, s, err)
}

// isEscape reports whether err is os.Root's "path escapes from parent".
// The os package does not export that error, so it is recognised by its
// text; a test pins the behaviour.
func isEscape(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent"
}

// Size returns the length of the object's file.
func (s *File) Size(ctx context.Context, object string) (int64, error) {
	f, size, err := s.open(ctx, object)
	if err != nil {
		return 0, err
	}
	f.Close()
	return size, nil
}

// ReadRange streams [off, off+length) of the object's file, cut at its
// end. The reader checks ctx before every read.
func (s *File) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	if err := checkRange(object, off, length); err != nil {
		return nil, err
	}
	f, _, err := s.open(ctx, object)
	if err != nil {
		return nil, err
	}
	return &fileReader{ctx: ctx, f: f, r: io.NewSectionReader(f, off, length), name: object, store: s}, nil
}

type fileReader struct {
	ctx   context.Context
	f     *os.File
	r     *io.SectionReader
	name  string
	store *File
}

func (r *fileReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: read object %q in %s: %w", ErrBackend, r.name, r.store, err)
	}
	return n, err
}

func (r *fileReader) Close() error { return r.f.Close() }
