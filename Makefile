# pacegate build and test entry points. `make test` is what CI runs.
GO ?= go

.PHONY: test vet unit build fmt

test: vet unit

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/pacegate .

fmt:
	gofmt -w $$(git ls-files '*.go')
