from looprescue.entry import main

main()
