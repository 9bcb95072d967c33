// see docs/http-api.md
