module github.com/idemgo/idem

go 1.26

require github.com/hashicorp/golang-lru/v2 v2.0.7
