from looprescue.cli import main

main()
