##@ Release

GO_TAGS ?= containers_image_openpgp
BUNDLEGEN ?= go run -tags $(GO_TAGS) ./tools/bundlegen
# VERSION selects channels/releases/<VERSION>.yaml; empty means the highest release there.
VERSION ?=

.PHONY: bundle
bundle: ## Generate and validate bundle/<package>/<VERSION> for both packages; never rewrites a released bundle.
	$(BUNDLEGEN) bundle $(if $(VERSION),--version $(VERSION))

.PHONY: bundle-check
bundle-check: ## Fail unless regenerating the release's bundles gives exactly the committed bytes (part of verify).
	$(BUNDLEGEN) bundle --check $(if $(VERSION),--version $(VERSION))

.PHONY: validate-bundles
validate-bundles: ## Validate every committed bundle under bundle/.
	$(BUNDLEGEN) validate bundle bundle/*/*

.PHONY: pin
pin: ## Print the release's operand pin from channels/images.lock (RESOLVE=1 refreshes the lock from the registries).
	$(BUNDLEGEN) pin $(if $(VERSION),--version $(VERSION)) $(if $(RESOLVE),--resolve)
