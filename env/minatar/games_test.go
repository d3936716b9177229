package minatar

var exactGames = []string{"breakout", "asterix", "freeway", "seaquest", "space_invaders"}
