module aaa.kbench/protoconflict

go 1.26.0
