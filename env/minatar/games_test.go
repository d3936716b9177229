package minatar

var exactGames = []string{"breakout"}
