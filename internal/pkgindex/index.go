package pkgindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// file is one distribution file an index lists for a project.
type file struct {
	Filename       string
	URL            string
	SHA256         string // lower-case hex; "" when the index gives none
	RequiresPython string
	Yanked         bool
}

const (
	jsonType = "application/vnd.pypi.simple.v1+json"
	htmlType = "application/vnd.pypi.simple.v1+html"
)

// projectFiles fetches the index's page for the normalized project name:
// PEP 691 JSON when the index speaks it, PEP 503 HTML otherwise.
func (r *resolver) projectFiles(ctx context.Context, name string) ([]file, error) {
	page, err := r.base.Parse(url.PathEscape(name) + "/")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadIndex, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, page.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadIndex, err)
	}
	req.Header.Set("Accept", jsonType+", "+htmlType+";q=0.5, text/html;q=0.1")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, r.fetchError(ctx, "the index page of "+name, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s (the index has no project of that name)", ErrNotFound, name)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: the index answered %s for %s", ErrIndexUnavailable, resp.Status, name)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.MaxPageBytes+1))
	if err != nil {
		return nil, r.fetchError(ctx, "the index page of "+name, err)
	}
	if int64(len(body)) > r.cfg.MaxPageBytes {
		return nil, fmt.Errorf("%w: the page for %s is larger than %d bytes", ErrBadIndex, name, r.cfg.MaxPageBytes)
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var files []file
	switch ctype {
	case jsonType:
		files, err = parseJSONPage(body)
	case htmlType, "text/html", "":
		files, err = parseHTMLPage(body)
	default:
		err = fmt.Errorf("content type %q is neither PEP 691 JSON nor PEP 503 HTML", clip(ctype))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the page for %s: %w", ErrBadIndex, name, err)
	}
	if len(files) > maxPageFiles {
		return nil, fmt.Errorf("%w: the page for %s lists more than %d files", ErrBadIndex, name, maxPageFiles)
	}
	for i := range files {
		u, err := page.Parse(files[i].URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: the page for %s links %q, not an http(s) URL", ErrBadIndex, name, clip(files[i].URL))
		}
		if sum, ok := strings.CutPrefix(u.Fragment, "sha256="); ok && files[i].SHA256 == "" {
			files[i].SHA256 = sum
		}
		u.Fragment = ""
		files[i].URL = u.String()
		files[i].SHA256 = strings.ToLower(files[i].SHA256)
	}
	return files, nil
}

// maxPageFiles bounds what one page may list (the largest real projects
// list a few thousand files).
const maxPageFiles = 50_000

func (r *resolver) fetchError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: fetching %s: the install's time ran out (%v)", ErrTimeout, what, context.Cause(ctx))
	}
	return fmt.Errorf("%w: fetching %s: %w", ErrIndexUnavailable, what, err)
}

func parseJSONPage(body []byte) ([]file, error) {
	var page struct {
		Meta struct {
			APIVersion string `json:"api-version"`
		} `json:"meta"`
		Files []struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython *string           `json:"requires-python"`
			Yanked         json.RawMessage   `json:"yanked"`
		} `json:"files"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("not PEP 691 JSON: %w", err)
	}
	if !strings.HasPrefix(page.Meta.APIVersion, "1.") {
		return nil, fmt.Errorf("PEP 691 api-version %q, want 1.x", clip(page.Meta.APIVersion))
	}
	out := make([]file, 0, len(page.Files))
	for _, f := range page.Files {
		if f.Filename == "" || f.URL == "" {
			return nil, errors.New("a file without a filename or url")
		}
		// yanked is false, true, or a reason (a string): anything but
		// false or absent yanks the file.
		y := strings.TrimSpace(string(f.Yanked))
		nf := file{Filename: f.Filename, URL: f.URL, SHA256: f.Hashes["sha256"], Yanked: y != "" && y != "false" && y != "null"}
		if f.RequiresPython != nil {
			nf.RequiresPython = *f.RequiresPython
		}
		out = append(out, nf)
	}
	return out, nil
}

var (
	anchorRE = regexp.MustCompile(`(?is)<a\s([^>]*)>(.*?)</a\s*>`)
	attrRE   = regexp.MustCompile(`(?s)([a-zA-Z][a-zA-Z0-9_-]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?`)
)

func parseHTMLPage(body []byte) ([]file, error) {
	text := string(body)
	if !strings.Contains(strings.ToLower(text), "<a") && !strings.Contains(strings.ToLower(text), "<html") {
		return nil, errors.New("not a PEP 503 HTML page (no links, no <html>)")
	}
	var out []file
	for _, m := range anchorRE.FindAllStringSubmatch(text, -1) {
		attrs := map[string]string{}
		for _, a := range attrRE.FindAllStringSubmatch(m[1], -1) {
			attrs[strings.ToLower(a[1])] = html.UnescapeString(a[2] + a[3] + a[4])
		}
		href, ok := attrs["href"]
		if !ok || href == "" {
			continue
		}
		name := strings.TrimSpace(html.UnescapeString(m[2]))
		if name == "" || strings.ContainsAny(name, "<>") {
			u, err := url.Parse(href)
			if err != nil {
				return nil, fmt.Errorf("a link %q: %w", clip(href), err)
			}
			name = u.Path[strings.LastIndexByte(u.Path, '/')+1:]
		}
		_, yanked := attrs["data-yanked"]
		out = append(out, file{Filename: name, URL: href, RequiresPython: attrs["data-requires-python"], Yanked: yanked})
	}
	return out, nil
}
