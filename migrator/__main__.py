from migrator.cli import main

main(prog_name="vam")
