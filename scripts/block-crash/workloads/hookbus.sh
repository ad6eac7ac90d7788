# hookbus: three hook cycles (assign, activate, touch, complete, clear, and
# a reassign), bus publishes with de-duplication and acknowledgements,
# nudges and reminders.
C=chipset
for w in w1 w2; do
  op hook-assign $C hook assign $w --bead b-$w --title "work for $w" --by mayor
  op hook-activate $C hook activate $w
done
E1=$(id); op bus-publish $C bus publish --to w1 --source mayor --kind task-ready --priority critical --id $E1
E2=$(id); op bus-publish $C bus publish --to w2 --source mayor --kind task-ready --priority low --dedup-key ready --payload '{"big":"'"$(head -c 3000 /data/body-100k.txt | tr -d '\n')"'"}' --id $E2
E3=$(id); op bus-publish $C bus publish --to w2 --source mayor --kind task-ready --priority low --dedup-key ready --id $E3
op hook-touch $C hook touch w1
op hook-complete $C hook complete w1
op bus-ack $C bus ack w1 $E1
op hook-clear $C hook clear w1
op nudge-send $C nudge send --from w2 --to mayor --type stall_warning --message "stuck on b-w2" --requires-response
op nudge-read $C nudge read mayor
op nudge-respond $C nudge respond mayor
op hook-reassign $C hook clear w2 --reassign
op hook-assign $C hook assign w2 --bead b-w2b --title "new work" --by mayor
op bus-ack $C bus ack w2 $E2
op remind-open $C remind open --kind handoff_pending --source-type handoff --source-id w2 --message "watch w2" --agent mayor
op hook-activate $C hook activate w2
op hook-complete $C hook complete w2
op hook-clear $C hook clear w2
E4=$(id); op bus-publish $C bus publish --to w1 --source ci --kind deploy --priority normal --id $E4
op bus-ack $C bus ack w1 $E4
