module github.com/projhost/projhost/sdk/go

go 1.24
