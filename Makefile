# syncd: the two commands a new user needs are `make demo` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin

.PHONY: all build demo test vet fmt clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/syncd ./cmd/syncd
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/formsim ./cmd/formsim

# Builds, starts the Forms API simulator on loopback, syncs its forms into
# ./out, adds a few submissions and syncs again to show an incremental pass.
demo: build
	./scripts/demo.sh

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1; }

# The whole suite: unit, end-to-end against the simulator, crash and fault tests.
test: vet
	$(GO) test -count=1 -timeout 20m ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) out state
