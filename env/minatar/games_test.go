package minatar

var exactGames = []string{"breakout", "asterix", "freeway", "space_invaders"}
